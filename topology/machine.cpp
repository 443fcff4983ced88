// SPDX-License-Identifier: BSD-3-Clause
#include "topology/machine.h"

#include <hwloc.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

namespace veneer::topology {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyHandle = std::unique_ptr<hwloc_topology, TopologyDeleter>;

struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* b) const { hwloc_bitmap_free(b); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

std::string size_text(int64_t bytes) {
  char text[32];
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0)
    std::snprintf(text, sizeof text, "%lldM", static_cast<long long>(bytes >> 20));
  else if (bytes >= 1024 && bytes % 1024 == 0)
    std::snprintf(text, sizeof text, "%lldK", static_cast<long long>(bytes >> 10));
  else std::snprintf(text, sizeof text, "%lldB", static_cast<long long>(bytes));
  return text;
}

std::string plural(int n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); }

// GPUs are display/3D controllers from GPU vendors (a BMC's VGA chip is not
// one); NICs are Ethernet, InfiniBand and other network controllers.
std::optional<DeviceKind> classify(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& pci) {
  unsigned cls = pci.class_id;
  if (cls == 0x0302) return DeviceKind::gpu;
  if (cls == 0x0300 && (pci.vendor_id == 0x10de || pci.vendor_id == 0x1002 || pci.vendor_id == 0x8086))
    return DeviceKind::gpu;
  if (cls == 0x1200) return DeviceKind::gpu;  // processing accelerators
  if (cls == 0x0200 || cls == 0x0207 || cls == 0x0280) return DeviceKind::nic;
  return std::nullopt;
}

void find_locality(hwloc_topology_t topo, hwloc_obj_t obj, PciDevice& dev) {
  hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(topo, obj);
  if (!anchor) return;
  if (anchor->nodeset && hwloc_bitmap_weight(anchor->nodeset) == 1) {
    int os_index = hwloc_bitmap_first(anchor->nodeset);
    if (hwloc_obj_t numa = hwloc_get_numanode_obj_by_os_index(topo, static_cast<unsigned>(os_index)))
      dev.numa_node = static_cast<int>(numa->logical_index);
  }
  if (hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, anchor))
    dev.package = static_cast<int>(pkg->logical_index);
  else if (anchor->type == HWLOC_OBJ_PACKAGE) dev.package = static_cast<int>(anchor->logical_index);
}

void find_devices(hwloc_topology_t topo, Machine& m) {
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci; pci = hwloc_get_next_pcidev(topo, pci)) {
    auto kind = classify(pci->attr->pcidev);
    if (!kind) continue;
    PciDevice dev;
    dev.kind = *kind;
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain, pci->attr->pcidev.bus,
                  pci->attr->pcidev.dev, pci->attr->pcidev.func);
    dev.bus_id = bus;
    // Prefer the OS name (eth0, mlx5_0, cuda0) of the first OS device below it.
    for (hwloc_obj_t child = pci->io_first_child; child; child = child->next_sibling) {
      if (child->type == HWLOC_OBJ_OS_DEVICE && child->name) {
        dev.name = child->name;
        break;
      }
    }
    if (dev.name.empty()) {
      char id[16];
      std::snprintf(id, sizeof id, "%04x:%04x", pci->attr->pcidev.vendor_id, pci->attr->pcidev.device_id);
      dev.name = id;
    }
    find_locality(topo, pci, dev);
    m.devices.push_back(std::move(dev));
  }
}

void find_caches(hwloc_topology_t topo, Machine& m) {
  const hwloc_obj_type_t levels[] = {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L4CACHE,
                                     HWLOC_OBJ_L5CACHE};
  for (int i = 0; i < 5; ++i) {
    int n = hwloc_get_nbobjs_by_type(topo, levels[i]);
    if (n <= 0) continue;
    hwloc_obj_t first = hwloc_get_obj_by_type(topo, levels[i], 0);
    m.caches.push_back(Cache{i + 1, static_cast<int64_t>(first->attr->cache.size), n});
  }
}

void find_binding(hwloc_topology_t topo, Machine& m) {
  Bitmap set(hwloc_bitmap_alloc());
  if (!set || hwloc_get_cpubind(topo, set.get(), HWLOC_CPUBIND_PROCESS) != 0) return;
  hwloc_bitmap_and(set.get(), set.get(), hwloc_topology_get_topology_cpuset(topo));
  m.bound_pus = hwloc_bitmap_weight(set.get());
  int numas = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < numas; ++i) {
    hwloc_obj_t numa = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    if (numa->cpuset && hwloc_bitmap_isincluded(set.get(), numa->cpuset)) {
      m.bound_numa_node = i;
      break;
    }
  }
  // An unbound process (the whole machine) spans every package of a multi-socket machine.
  if (hwloc_obj_t pkg = hwloc_get_next_obj_covering_cpuset_by_type(topo, set.get(), HWLOC_OBJ_PACKAGE, nullptr))
    if (hwloc_bitmap_isincluded(set.get(), pkg->cpuset)) m.bound_package = static_cast<int>(pkg->logical_index);
}

}  // namespace

int Machine::gpus() const {
  int n = 0;
  for (const PciDevice& d : devices) n += d.kind == DeviceKind::gpu;
  return n;
}

int Machine::nics() const {
  int n = 0;
  for (const PciDevice& d : devices) n += d.kind == DeviceKind::nic;
  return n;
}

std::string Machine::summary() const {
  if (pus == 0) return "unknown machine (" + source + ")";
  std::string s = plural(packages, "package", "packages") + ", " + plural(numa_nodes, "NUMA node", "NUMA nodes") +
                  ", " + plural(cores, "core", "cores") + ", " + plural(pus, "PU", "PUs");
  if (!caches.empty()) {
    s += ";";
    for (const Cache& c : caches)
      s += " L" + std::to_string(c.level) + " " + size_text(c.bytes) + " x" + std::to_string(c.instances);
  }
  for (DeviceKind kind : {DeviceKind::gpu, DeviceKind::nic}) {
    s += kind == DeviceKind::gpu ? "; GPUs:" : "; NICs:";
    bool any = false;
    for (const PciDevice& d : devices) {
      if (d.kind != kind) continue;
      s += " " + d.name + (d.numa_node >= 0 ? "@numa" + std::to_string(d.numa_node) : std::string());
      any = true;
    }
    if (!any) s += " -";
  }
  if (bound_pus > 0) s += "; bound to " + plural(bound_pus, "PU", "PUs");
  s += " (" + source + ")";
  return s;
}

MachineSource machine_source_from_env() {
  MachineSource src;
  if (const char* xml = std::getenv("VENEER_HWLOC_XML")) src.xml_path = xml;
  if (const char* syn = std::getenv("VENEER_HWLOC_SYNTHETIC")) src.synthetic = syn;
  return src;
}

std::optional<Machine> discover_machine(const MachineSource& source, std::string* error) {
  auto fail = [&](const std::string& what) -> std::optional<Machine> {
    if (error) *error = what;
    return std::nullopt;
  };
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return fail("hwloc_topology_init failed");
  TopologyHandle topo(raw);
  Machine m;
  m.source = "this machine";
  // PCI devices are worth the discovery time only for GPUs and NICs ("important" ones).
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (!source.xml_path.empty()) {
    if (hwloc_topology_set_xml(raw, source.xml_path.c_str()) != 0)
      return fail("cannot read hwloc XML " + source.xml_path);
    m.source = "xml:" + source.xml_path;
  } else if (!source.synthetic.empty()) {
    if (hwloc_topology_set_synthetic(raw, source.synthetic.c_str()) != 0)
      return fail("bad hwloc synthetic description \"" + source.synthetic + "\"");
    m.source = "synthetic:" + source.synthetic;
  }
  if (hwloc_topology_load(raw) != 0) return fail("hwloc_topology_load failed");
  m.packages = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PACKAGE);
  m.numa_nodes = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_NUMANODE);
  m.cores = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_CORE);
  m.pus = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PU);
  find_caches(raw, m);
  find_devices(raw, m);
  // The binding describes this process only when the topology is this machine's.
  if (source.xml_path.empty() && source.synthetic.empty()) find_binding(raw, m);
  return m;
}

const Machine& machine() {
  static Machine m;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string error;
    MachineSource src = machine_source_from_env();
    if (auto found = discover_machine(src, &error)) {
      m = std::move(*found);
    } else {
      m.source = error;
    }
  });
  return m;
}

}  // namespace veneer::topology
