// SPDX-License-Identifier: BSD-3-Clause
// The differential test's pack checks (differential.h): MPI_Pack and
// MPI_Unpack through Veneer against the library and the reference, and
// Veneer's engine packing in fragments.
#include <algorithm>
#include <cstring>
#include <variant>

#include "datatypes/decode.h"
#include "datatypes/pack.h"
#include "test/datatypes/differential.h"

namespace veneer::test::differential {

namespace vd = veneer::datatypes;

// MPI_Pack (Veneer) against PMPI_Pack at several starting positions and
// output sizes; whole output buffers compared, input left untouched.
void Checker::pack(std::mt19937_64& rng) {
  ++tally_.pack_checks;
  int size_v = -1, size_l = -1;
  int rc_v = MPI_Pack_size(s_.count, s_.type, comm_, &size_v);
  int rc_l = PMPI_Pack_size(s_.count, s_.type, comm_, &size_l);
  same_int(error_class(rc_v), error_class(rc_l), "MPI_Pack_size return code");
  same_int(size_v, size_l, "MPI_Pack_size");
  s_.memory.fill(kData);
  const std::vector<unsigned char> before = s_.memory.snapshot();
  const std::vector<unsigned char> reference = reference_pack(s_);
  for (int trial = 0; trial < 3; ++trial) {
    int start = trial == 0 ? 0 : static_cast<int>(rng() % 37 + 1);
    int outsize = start + static_cast<int>(s_.stream) + (trial == 2 ? static_cast<int>(rng() % 40 + 1) : 0);
    std::vector<unsigned char> out_v(outsize + kGuard), out_l(outsize + kGuard), out_r(outsize + kGuard);
    fill_pattern(out_v, kOutBackground);
    fill_pattern(out_l, kOutBackground);
    fill_pattern(out_r, kOutBackground);
    std::copy(reference.begin(), reference.end(), out_r.begin() + start);
    int pos_v = start, pos_l = start;
    rc_v = MPI_Pack(s_.buf, s_.count, s_.type, out_v.data(), outsize, &pos_v, comm_);
    rc_l = PMPI_Pack(s_.buf, s_.count, s_.type, out_l.data(), outsize, &pos_l, comm_);
    std::string at = " (position " + std::to_string(start) + ", outsize " + std::to_string(outsize) + ")";
    if (!library_packs()) {
      // The library refuses; Veneer may refuse alike (passing the call on)
      // or do it right.
      ++tally_.mpich_skips;
      if (rc_v != MPI_SUCCESS && error_class(rc_v) == error_class(rc_l) && pos_v == pos_l &&
          first_difference(out_v, out_l) < 0)
        continue;
      same_int(error_class(rc_v), MPI_SUCCESS, "MPI_Pack return code (against the reference)" + at);
      same_int(pos_v, start + s_.stream, "MPI_Pack position (against the reference)" + at);
      vote(out_v, nullptr, out_r, "MPI_Pack output" + at, false);
      continue;
    }
    same_int(error_class(rc_v), error_class(rc_l), "MPI_Pack return code" + at);
    same_int(pos_v, pos_l, "MPI_Pack position" + at);
    Bytes library(out_l);
    vote(out_v, &library, out_r, "MPI_Pack output" + at, false);
  }
  if (first_difference(s_.memory.snapshot(), before) >= 0) fail("MPI_Pack changed its input");
}

// MPI_Unpack (Veneer) against PMPI_Unpack and the reference, into
// pre-filled memory. Sets the library's and the reference's memory after
// unpacking `stream` at position 0, for the engine's checks.
void Checker::unpack(std::mt19937_64& rng, const std::vector<unsigned char>& stream, bool library_can, bool veneer_can,
                     std::optional<std::vector<unsigned char>>& library_result,
                     std::vector<unsigned char>& reference_result) {
  ++tally_.unpack_checks;
  for (int trial = 0; trial < 2; ++trial) {
    int start = trial == 0 ? 0 : static_cast<int>(rng() % 37 + 1);
    int insize = start + static_cast<int>(s_.stream) + (trial == 0 ? 0 : static_cast<int>(rng() % 20));
    std::vector<unsigned char> in(insize);
    fill_pattern(in, kOutBackground);
    std::copy(stream.begin(), stream.end(), in.begin() + start);
    std::string at = " (position " + std::to_string(start) + ", insize " + std::to_string(insize) + ")";
    s_.memory.fill(kBackground);
    reference_unpack(s_, stream.data(), s_.stream);
    std::vector<unsigned char> reference = s_.memory.snapshot();
    std::optional<std::vector<unsigned char>> library;
    int pos_l = start + static_cast<int>(s_.stream), rc_l = MPI_SUCCESS;
    if (library_can) {
      s_.memory.fill(kBackground);
      pos_l = start;
      rc_l = PMPI_Unpack(in.data(), insize, &pos_l, s_.buf, s_.count, s_.type, comm_);
      library = s_.memory.snapshot();
    }
    if (veneer_can) {
      s_.memory.fill(kBackground);
      int pos_v = start;
      int rc_v = MPI_Unpack(in.data(), insize, &pos_v, s_.buf, s_.count, s_.type, comm_);
      if (!library_packs()) {
        // The library refuses MPI_BOTTOM; Veneer may refuse alike or do it right.
        int pos_refused = start;
        s_.memory.fill(kBackground);
        int rc_refused = PMPI_Unpack(in.data(), insize, &pos_refused, s_.buf, s_.count, s_.type, comm_);
        if (rc_v != MPI_SUCCESS && error_class(rc_v) == error_class(rc_refused) && pos_v == pos_refused) continue;
        s_.memory.fill(kBackground);
        pos_v = start;
        rc_v = MPI_Unpack(in.data(), insize, &pos_v, s_.buf, s_.count, s_.type, comm_);
      }
      same_int(error_class(rc_v), error_class(rc_l), "MPI_Unpack return code" + at);
      same_int(pos_v, pos_l, "MPI_Unpack position" + at);
      Bytes l(library ? *library : reference);
      vote(s_.memory.snapshot(), library ? &l : nullptr, reference, "MPI_Unpack memory" + at, true);
    }
    if (trial == 0) {
      library_result = std::move(library);
      reference_result = std::move(reference);
    }
  }
}

// The engine packs and unpacks any byte range of the stream: pieces of 1, 7,
// 64, 4096 and a random number of bytes from a random start, concatenated,
// must equal the whole packing (and unpacking).
void Checker::engine(std::mt19937_64& rng, const std::vector<unsigned char>& stream, bool can_unpack,
                     const std::optional<std::vector<unsigned char>>& library_unpacked,
                     const std::vector<unsigned char>& reference_unpacked) {
  auto decoded = vd::decode(s_.type);
  if (const auto* e = std::get_if<vd::DecodeError>(&decoded)) {
    ++tally_.undecodable;
    note(tally_.undecodable_examples, e->why + " <- " + s_.gen.description.substr(0, 300));
    return;
  }
  ++tally_.engine_checks;
  const vd::Layout& layout = std::get<vd::Layout>(decoded);
  // The layout's bounds are defined as the library's (MPI_Type_get_extent and
  // friends), even where the library's bounds are wrong.
  same_int(layout.size, s_.shape.size, "decode: size");
  same_int(layout.lb, s_.shape.lb, "decode: lb");
  same_int(layout.extent, s_.shape.extent, "decode: extent");
  same_int(layout.true_lb, s_.shape.true_lb, "decode: true lb");
  same_int(layout.true_extent, s_.shape.true_extent, "decode: true extent");
  if (layout.extent != s_.shape.extent) return;  // the fragments below would run off the buffers
  if (layout.size != s_.shape.size) return;

  const int64_t n = s_.stream;
  const std::optional<std::vector<unsigned char>> library = library_pack();
  s_.memory.fill(kData);
  const std::vector<unsigned char> reference = reference_pack(s_);
  const Bytes library_bytes(library ? *library : reference);
  std::vector<int64_t> fragments = {1, 7, 64, 4096, static_cast<int64_t>(rng() % std::max<int64_t>(n, 1)) + 1};
  for (int64_t fragment : fragments) {
    int64_t start = n ? static_cast<int64_t>(rng() % (n + 1)) : 0;
    std::vector<unsigned char> out(n + kGuard);
    fill_pattern(out, kOutBackground);
    std::vector<unsigned char> background = out;
    std::string at = " (fragments of " + std::to_string(fragment) + " from " + std::to_string(start) + ")";
    for (auto [skip, want] : schedule(n, start, fragment)) {
      int64_t got = vd::pack(layout, s_.count, s_.buf, skip, want, out.data() + skip);
      int64_t expected = std::min(want, n - skip);
      if (got != expected) {
        same_int(got, expected, "pack() return value at skip " + std::to_string(skip) + at);
        break;
      }
    }
    vote(Bytes(out).first(n), library ? &library_bytes : nullptr, reference, "pack() pieces" + at, false);
    if (first_difference(Bytes(out).subspan(n), Bytes(background).subspan(n)) >= 0)
      fail("pack() wrote past the stream" + at);
  }
  std::vector<unsigned char> sink(kGuard);
  same_int(vd::pack(layout, s_.count, s_.buf, n, kGuard, sink.data()), 0, "pack() at the end of the stream");

  if (!can_unpack) return;
  std::optional<Bytes> library_memory;
  if (library_unpacked) library_memory = Bytes(*library_unpacked);
  for (int64_t fragment : fragments) {
    int64_t start = n ? static_cast<int64_t>(rng() % (n + 1)) : 0;
    std::string at = " (fragments of " + std::to_string(fragment) + " from " + std::to_string(start) + ")";
    s_.memory.fill(kBackground);
    for (auto [skip, want] : schedule(n, start, fragment)) {
      int64_t got = vd::unpack(layout, s_.count, s_.buf, skip, want, stream.data() + skip);
      int64_t expected = std::min(want, n - skip);
      if (got != expected) {
        same_int(got, expected, "unpack() return value at skip " + std::to_string(skip) + at);
        break;
      }
    }
    vote(s_.memory.snapshot(), library_memory ? &*library_memory : nullptr, reference_unpacked, "unpack() pieces" + at,
         true);
  }
}

}  // namespace veneer::test::differential
