// Slicing: the graph of a whole job from one captured rank per role.
//
// Roles come from the layout. A job's ranks are Megatron's grid (tp, cp,
// dp, pp, innermost first); ranks of one pipeline stage run one program up
// to which communicators and peers they hold, so each stage is a role
// ("stage0", ...), as the builder's graph has them. For a job with a model
// section the roles are the builder's; for a program's job (no model
// section) they are the stages of its declared parallel sizes, with the
// data-parallel dimension split into "ep" (innermost) and "edp" when
// expert_model_parallel_size > 1.
//
// A role's captured rank (its representative: the lowest captured rank of
// the role) gives the role's program: its measured compute, op order,
// communicators and memory events. Another rank r of the role holds the
// representative's communicators and peers moved to r's place in the grid:
// each member's coordinates shift by r's minus the representative's, modulo
// each dimension's size. Communicators become slots:
//   - with a model, the builder's slot whose group at the representative
//     has the same members (and peers: the same peer), so that captured and
//     modelled roles meet on the same communicators;
//   - a group of whole dimensions in rank order: a grid slot named after
//     them ("tp", "dp", "tp+dp"; "world" when it spans every dimension);
//   - a send to a rank one dimension away: a grid peer slot ("dp+1",
//     "pp+1", "pp-1");
//   - anything else: an explicit table, filled for every rank of the role,
//     named by the group's shape ("pp{0,3}": first and last stage; "group-"
//     and a hash for an irregular one). Roles that hold the same
//     communicator must give the same table.
// A second communicator with the same members on one rank adds "#2", and so
// on. More captured ranks of one role are checked against the
// representative: the same communication, memory and marker ops in the same
// order, on the moved communicators and peers. A peer that every rank of
// the role names at the same place (the root of a gather: rank 0 of the
// group) is anchored there instead of moved (slices_grid.h, anchor()). For
// a program's job, a role whose captured ranks differ is split by a rule of
// the layout (slicing/role_split.h) into roles of its own ("stage0.first",
// "stage0.others"), each with its representative; where no rule fits, the
// first difference is the error. With a model, the first difference is the
// error. A role with no capture runs the builder's model, when the job has
// one, and the report says so; a program's job has none to fall back on.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "graph/graph_json.h"
#include "slicing/capture_file.h"
#include "slicing/rank_program.h"
#include "util/status.h"
#include "workload/job_spec.h"

namespace prism {

// The grid of a program's job (no model section).
Result<Layout> program_layout(const JobSpec& job);

struct SliceRoles {
  Layout layout;
  std::vector<std::string> names;          // role -> name
  std::vector<std::int32_t> role_of_rank;  // rank -> role
  std::vector<std::vector<Rank>> ranks;    // role -> its ranks, ascending
  // role -> the part of a layout role that it is, when split ("stage0's
  // first rank"); empty: the whole layout role.
  std::vector<std::string> what;
};

// The roles of `job`: the builder's graph's (`model`, when the job has a
// model section), else one per pipeline stage of program_layout().
Result<SliceRoles> slice_roles(const JobSpec& job, const ExecutionGraph* model);

// What the roles of a program's job take into account besides the
// captures (docs/emulate.md, "Roles").
struct RoleHints {
  std::vector<Rank> real;    // the emulation's real ranks: each represents its class
  std::vector<Rank> listed;  // --capture-ranks: set apart where no rule of the layout fits
};

struct FoundRoles {
  SliceRoles roles;
  std::vector<Rank> capture;        // ranks to capture before the roles are known (ascending)
  std::string pending;              // then: the first role's name and its first difference
  std::vector<std::string> splits;  // one line per split role: its rule and why
};

// The roles of a program's job (no model section) as `captures` show them:
// the layout's, each split where its captured ranks differ
// (slicing/role_split.h). Ranks still needed to tell the rules apart are in
// `capture`; no rule fitting a role's captures is the error, which names
// two ranks that differ and their first differing op.
Result<FoundRoles> find_roles(const JobSpec& job, const std::vector<RankProgram>& captures,
                              const RoleHints& hints);

// Where a role's program came from.
struct RoleSource {
  std::string role;
  int num_ranks = 0;
  Rank first_rank = 0;
  Rank captured = kNone;      // the rank whose capture the role runs; kNone: the model's
  std::vector<Rank> checked;  // further captured ranks of the role, found equivalent
  std::string what;           // a split role: "ranks 1-7: stage0's ranks but the first"
};

struct SlicedGraph {
  ExecutionGraph graph;
  std::vector<RoleSource> roles;
  std::vector<std::string> splits;  // FoundRoles::splits
};

// Builds `job`'s graph from `captures` (programs of captured ranks, any
// order, each rank at most once). `model`: the builder's graph of a job
// with a model section, else nullptr; without one, the roles are
// find_roles()'s, and captures too few to tell how a role splits are an
// error naming the ranks to capture. The result has passed finalize_graph
// and validate_graph.
Result<SlicedGraph> graph_from_slices(const JobSpec& job, const ExecutionGraph* model,
                                      std::vector<RankProgram> captures,
                                      const RoleHints& hints = {});

// The capture files (docs/emulate.md, "Capture files") in `dir`: every
// *.json whose "format" is "prism-capture", in name order. None is an error.
// `sent`, when given, receives what each capture recorded its rank sent
// with torch's object lists (slicing/capture_file.h), by rank.
Result<std::vector<RankProgram>> read_slices(
    const std::string& dir, int world_size,
    std::map<Rank, std::vector<CapturedObject>>* sent = nullptr);

// What a graph built from captures keeps beside it (slicing/graph_objects.h),
// as `prism emulate --save-graph` does: each role's captured rank, and what
// those ranks sent (`sent`, from read_slices).
std::vector<ExtraSection> slice_object_sections(
    const SlicedGraph& s, const std::map<Rank, std::vector<CapturedObject>>& sent);

// Whether captures can describe `job`: it has no model section (a job
// without one describes the user's own program: world size, cluster,
// parallel sizes). Checked before the program runs.
Status check_capturable(const JobSpec& job);

// The graph of `job` (no model section) from one rank's capture file text
// (docs/emulate.md, "Capture files"): every role of the job's layout must be
// that rank's (a data-parallel program, or one whose only role is the
// captured rank's).
Result<ExecutionGraph> graph_from_capture(const JobSpec& job, std::string_view capture_json,
                                          const std::string& source);

// The role table: each role's ranks and where its program came from, then
// a line per split role saying by which rule and why.
std::string format_slice_report(const SlicedGraph& s);

}  // namespace prism
