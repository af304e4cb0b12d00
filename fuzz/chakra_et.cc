// Fuzz target: the Chakra execution trace importer (chakra/et_file.h,
// chakra/import_rank.h) and the comm groups file (chakra/comm_groups.h).
//
// Input: one byte, then (when that byte's high bit is set) a comm groups JSON
// text ended by a NUL byte, then the trace's bytes. The first byte gives the
// world size (1 + bits 0-3) and the rank (bits 4-6, modulo the world size).
// Without the high bit there is no groups file, as when import_chakra()
// finds none. Groups are decoded as import_chakra() does, then the trace,
// then the rank's program.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "chakra/comm_groups.h"
#include "chakra/et_file.h"
#include "chakra/import_rank.h"

namespace chakra = prism::chakra;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int world = 1 + (data[0] & 0x0f);
  const prism::Rank rank = ((data[0] >> 4) & 0x7) % world;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);

  chakra::ImportContext ctx;
  ctx.world_size = world;
  std::unordered_map<std::string, std::vector<prism::Rank>> members;
  if ((data[0] & 0x80) != 0) {
    const std::size_t nul = rest.find('\0');
    if (nul == std::string_view::npos) return 0;
    const auto groups =
        chakra::parse_comm_groups(rest.substr(0, nul), world, "fuzz.comm_groups.json");
    if (!groups.is_ok()) return 0;
    for (const chakra::CommGroup& g : *groups) members[g.id] = g.members;
    ctx.groups = &members;
    ctx.groups_source = "fuzz.comm_groups.json";
    rest.remove_prefix(nul + 1);
  }
  const auto file = chakra::decode_et(rest, "fuzz.0.et");
  if (!file.is_ok()) return 0;
  (void)chakra::rank_program(*file, rank, ctx, "fuzz.0.et");
  return 0;
}
