// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// What hwloc sees of the machine this process runs on: packages, NUMA nodes,
// cores, caches, and the PCI GPUs and NICs with the NUMA node they hang off.
// Read once per process; VENEER_HWLOC_XML (a file written by `lstopo x.xml`)
// or VENEER_HWLOC_SYNTHETIC (e.g. "pack:2 numa:2 core:8 pu:2") replace the
// real machine, so models can be tried on machines one does not have.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace veneer::topology {

struct Cache {
  int level = 0;      // 1, 2, 3, ...
  int64_t bytes = 0;  // size of one instance
  int instances = 0;  // how many of them in the machine
};

enum class DeviceKind { gpu, nic };

struct PciDevice {
  DeviceKind kind = DeviceKind::gpu;
  std::string name;    // OS name where hwloc knows one (eth0, mlx5_0, card0), else vendor:device
  std::string bus_id;  // "0000:3b:00.0"
  int numa_node = -1;  // logical index of the nearest NUMA node, -1 if unknown
  int package = -1;    // logical index of the nearest package, -1 if unknown
};

struct Machine {
  int packages = 0;
  int numa_nodes = 0;
  int cores = 0;
  int pus = 0;                     // hardware threads
  std::vector<Cache> caches;       // data and unified caches, by level
  std::vector<PciDevice> devices;  // GPUs and NICs
  int bound_pus = 0;               // PUs this process may run on (its binding), 0 if unknown
  int bound_numa_node = -1;        // NUMA node holding the whole binding, -1 if it spans several
  int bound_package = -1;          // package (socket) holding the whole binding, -1 if it spans several
  std::string source;              // "this machine", "xml:<path>", "synthetic:<description>"

  int gpus() const;
  int nics() const;
  // One line: "1 package, 1 NUMA node, 2 cores, 2 PUs; L1 32K x2, L2 ...; GPUs: -; NICs: eth0@numa0".
  std::string summary() const;
};

// Where to read the machine from (all empty: this machine).
struct MachineSource {
  std::string xml_path;
  std::string synthetic;
};

// The source named by VENEER_HWLOC_XML / VENEER_HWLOC_SYNTHETIC.
MachineSource machine_source_from_env();

// Runs hwloc discovery; nullopt (with `error` filled) if hwloc fails.
std::optional<Machine> discover_machine(const MachineSource& source, std::string* error = nullptr);

// The machine of this process, discovered on first use (thread-safe). If
// discovery fails, an empty Machine whose summary says so.
const Machine& machine();

}  // namespace veneer::topology
