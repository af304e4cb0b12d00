// The device memory a PyTorch process holds outside its caching allocator:
// the CUDA context and NCCL's buffers. Pure formulas of NCCL 2.28's
// allocations (src/init.cc, src/channel.cc, src/transport/{p2p,net,nvls}.cc,
// src/transport/generic.cc), so that memory at 8,192 ranks differs from
// memory at 8 exactly where NCCL's does. Every constant and formula, with
// its source, is in docs/memory.md ("Fixed footprints").
//
// Two facts shape every figure. With cuMem (NCCL_CUMEM_ENABLE, on by
// default) each NCCL device allocation is rounded up to the allocation
// granularity (2 MiB), so small per-channel structures cost 2 MiB each. And
// with NCCL_RUNTIME_CONNECT=1 (the default, which needs cuMem) a
// communicator allocates its channels at init but connects an algorithm's
// buffers only when a collective first needs it, and a peer's p2p buffers
// on the first send/recv with it; otherwise everything connects at init.
//
// Byte counts are per rank. Where NCCL gives the ranks of a node different
// roles per channel (the one whose NIC a ring or tree channel crosses), the
// figure is the node's total over its ranks, rounded up: NCCL rotates those
// roles over the node's GPUs from channel to channel.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace prism {

// NCCL 2.28 constants (src/include/device.h, comm.h, init.cc, net.cc).
inline constexpr std::int64_t kNcclSteps = 8;  // NCCL_STEPS
// DEFAULT_LL_BUFFSIZE: LL_LINES_PER_THREAD 8 x LL_MAX_NTHREADS 512 x steps x 16-byte line.
inline constexpr std::int64_t kNcclDefaultLlBuffSize = 8 * 512 * kNcclSteps * 16;
// DEFAULT_LL128_BUFFSIZE: LL128_ELEMS_PER_THREAD 120 x LL128_MAX_NTHREADS 640 x steps x 8.
inline constexpr std::int64_t kNcclDefaultLl128BuffSize = 120 * 640 * kNcclSteps * 8;
inline constexpr std::int64_t kNcclDefaultBuffSize = std::int64_t{4} << 20;  // DEFAULT_BUFFSIZE
// sizeof(ncclSendMem) == sizeof(ncclRecvMem) == MEM_ALIGN: head/tail and step FIFO.
inline constexpr std::int64_t kNcclConnCtrlBytes = 4096;
inline constexpr std::int64_t kCudaIpcMin = std::int64_t{2} << 20;        // CUDA_IPC_MIN
inline constexpr std::int64_t kCuMemGranularity = std::int64_t{2} << 20;  // minimum, A100..B200
inline constexpr std::int64_t kNcclSharedSteps = 16;                      // NCCL_SHARED_STEPS
inline constexpr int kNcclMaxChannels = 64;                               // MAXCHANNELS
// sizeof(ncclDevChannelPeer): 4 ncclConnInfo of 152 bytes (x86-64 layout).
inline constexpr std::int64_t kNcclDevChannelPeerBytes = 608;
// sizeof(ncclKernelCommAndChannels), about 24 KiB; one granule either way.
inline constexpr std::int64_t kNcclDevCommBytes = std::int64_t{24} << 10;
inline constexpr std::int64_t kNcclNvlsCreditBytes = 64;  // per head, channel and direction
// What a process's first communicator takes beyond every later one and keeps
// after they are all destroyed: measured, not derived (NCCL 2.28.9, CUDA
// 13.0, torch 2.11, H200, 2026-11-27: a one-rank communicator took
// 608,174,080 B at the first init and 406,847,488 B at the second, and
// 212 MiB stayed after both were destroyed, 20 MiB of it the test's tensor;
// docs/memory.md, "NCCL's share of the process").
inline constexpr std::int64_t kNcclProcessBytes = std::int64_t{192} << 20;

// NCCL's environment knobs that change its device memory, at NCCL's defaults.
struct NcclFootprintConfig {
  std::int64_t buffsize = kNcclDefaultBuffSize;              // NCCL_BUFFSIZE (Simple)
  std::int64_t ll_buffsize = kNcclDefaultLlBuffSize;         // NCCL_LL_BUFFSIZE
  std::int64_t ll128_buffsize = kNcclDefaultLl128BuffSize;   // NCCL_LL128_BUFFSIZE
  std::int64_t p2p_nvl_chunksize = std::int64_t{512} << 10;  // NCCL_P2P_NVL_CHUNKSIZE
  std::int64_t p2p_net_chunksize = std::int64_t{128} << 10;  // NCCL_P2P_NET_CHUNKSIZE
  std::int64_t nvls_chunksize = std::int64_t{128} << 10;     // NCCL_NVLS_CHUNKSIZE
  bool nvls_enable = true;         // NCCL_NVLS_ENABLE (default: on where NVSwitch multicast is)
  int nvls_nchannels = 0;          // NCCL_NVLS_NCHANNELS; 0 = NCCL's default for the GPU
  bool runtime_connect = true;     // NCCL_RUNTIME_CONNECT
  bool cumem_enable = true;        // NCCL_CUMEM_ENABLE (runtime connect needs it)
  int nchannels_per_net_peer = 0;  // NCCL_NCHANNELS_PER_NET_PEER; 0 = NCCL's rule
  int min_p2p_nchannels = 1;       // NCCL_MIN_P2P_NCHANNELS
  int max_p2p_nchannels = kNcclMaxChannels;  // NCCL_MAX_P2P_NCHANNELS
  int p2p_read_enable = -1;  // NCCL_P2P_READ_ENABLE; -1 = NCCL's rule (Ampere over NVLink)
  bool net_gdr = true;       // GPUDirect RDMA: network receive buffers in GPU memory
  bool net_gdr_read = true;  // NCCL_NET_GDR_READ: send buffers too (default from Ampere)
  std::int64_t granularity = kCuMemGranularity;  // cuMem allocation granularity
  // Once per process, at its first communicator (kNcclProcessBytes).
  std::int64_t process_bytes = kNcclProcessBytes;
};

// Whether connections wait for first use (NCCL_RUNTIME_CONNECT=1 and cuMem).
bool nccl_runtime_connect(const NcclFootprintConfig& c);

// What NCCL decided for one communicator, as seen from one of its ranks.
struct NcclCommShape {
  int num_ranks = 1;
  int num_nodes = 1;
  int local_ranks = 1;            // the communicator's ranks on this rank's node
  int channels = 1;               // collective channels (comm->nChannels)
  int p2p_channels = 1;           // comm->p2pnChannels
  int p2p_channels_per_peer = 1;  // comm->p2pnChannelsPerPeer
  int nvls_channels = 0;          // comm->nvlsChannels; 0 = no NVLS
  int nvls_heads = 0;             // NVLS heads (one per local GPU with a NIC)
  bool p2p_read = false;          // the P2P transport uses read mode
};

struct NcclP2pChannels {
  int channels = 1;  // comm->p2pnChannels
  int per_peer = 1;  // comm->p2pnChannelsPerPeer
};
// ncclTopoComputeP2pChannels (graph/paths.cc) for a communicator of
// `comm_channels` collective channels: NVLink peers allow 2 channels per
// link (`nvlink_links` links to the switches; 0 = PCIe, 2 channels), network
// peers 2, halved while 4 x p2p channels < per-peer channels x ranks.
NcclP2pChannels nccl_p2p_channels(const NcclFootprintConfig& c, int comm_channels, int num_ranks,
                                  int num_nodes, int local_ranks, int nvlink_links);
// comm->nvlsChannels (transport/nvls.cc ncclNvlsInit): 16 on Hopper; on
// Blackwell 24 in one node and 32 across nodes; NCCL_NVLS_NCHANNELS wins.
int nccl_nvls_channels(const NcclFootprintConfig& c, bool blackwell, bool multi_node);
// comm->p2pChunkSize (init.cc computeBuffSizes) for all-NVLink nodes,
// capped so that NCCL_STEPS chunks fit in the Simple buffer.
std::int64_t nccl_p2p_chunk_bytes(const NcclFootprintConfig& c, int num_nodes);

// Device bytes one NCCL allocation of `bytes` takes (cuMem granularity).
std::int64_t nccl_device_alloc_bytes(const NcclFootprintConfig& c, std::int64_t bytes);

// Communicator init on one rank (init.cc initTransportsRank, devCommSetup;
// channel.cc initChannel; nvls.cc ncclNvlsSetup): per channel its peer
// tables and ring ranks, the device communicator, and NVLS's per-channel
// peers and credits. The work FIFO and proxy state are host memory.
std::int64_t nccl_comm_init_bytes(const NcclFootprintConfig& c, const NcclCommShape& s);

enum class NcclTransport : std::uint8_t { kP2p, kNet };  // same node (NVLink/PCIe), network
enum class NcclSide : std::uint8_t { kSend, kRecv };
// Device bytes of one connector (one channel, one peer, one direction) of a
// ring, tree or p2p connection, on the rank at `side`. P2P: the receiver
// holds LL, LL128 and Simple buffers behind its ncclRecvMem, the sender its
// ncclSendMem, except that read mode moves Simple to the sender; both are
// rounded to CUDA_IPC_MIN. Network: the receiver's buffers are in GPU
// memory with GDR, the sender's LL128 and Simple with GDR read (LL always
// in host memory). Host memory does not count.
std::int64_t nccl_endpoint_bytes(const NcclFootprintConfig& c, NcclTransport t, NcclSide side,
                                 bool p2p_read);

// The network's shared p2p buffer pool of one side (net.cc
// sharedNetBuffersInit): p2p channels x NCCL_SHARED_STEPS x p2p chunk, one
// per communicator and direction, shared by every network peer. Zero when
// the side's buffers are in host memory.
std::int64_t nccl_p2p_net_pool_bytes(const NcclFootprintConfig& c, const NcclCommShape& s,
                                     NcclSide side);
// Send/recv with one peer, on the rank at `side`: p2p channels per peer x
// one connector within a node; nothing per peer across nodes (the shared
// pool above serves them).
std::int64_t nccl_p2p_peer_bytes(const NcclFootprintConfig& c, const NcclCommShape& s,
                                 bool same_node, NcclSide side);

// What a collective connects (NCCL's algorithms; kP2p = all-to-all, a
// send and a receive with every peer).
enum class NcclConnection : std::uint8_t { kRing, kTree, kNvls, kNvlsTree, kCollNet, kPat, kP2p };
std::string_view to_string(NcclConnection c);

// Connections that algorithms share on a communicator (channel, peer and
// direction name one connector, and connector 0 serves ring, tree, PAT and
// NVLS tree alike). A rank's bytes for each set only grow: connecting an
// algorithm adds, per set, what it needs beyond what is there.
enum class NcclLinkSet : std::uint8_t {
  kIntraForward,    // ring edges inside a node (tree's chain to its child reuses them)
  kIntraReverse,    // tree's chain edges to the parent, inside a node
  kRingNet,         // the ring's edge into and out of the node
  kTreeNet,         // double binary tree edges between nodes
  kPatNet,          // PAT's binomial peers beyond the ring's (one rank per node)
  kNvlsBuffer,      // NVLS unicast buffer bound to the multicast group
  kNvlsTreeNet,     // NVLS tree edges between nodes
  kP2pSend,         // p2p send connectors to peers on the node
  kP2pRecv,         // p2p receive connectors from peers on the node
  kP2pNetSendPool,  // shared network send pool
  kP2pNetRecvPool,  // shared network receive pool
};
inline constexpr int kNumNcclLinkSets = 11;
using NcclLinks = std::array<std::int64_t, kNumNcclLinkSets>;

// Bytes per link set that connecting `conn` needs on one rank. CollNet is
// not modelled (no IB SHARP in the cluster model): zero.
NcclLinks nccl_connection_links(const NcclFootprintConfig& c, NcclConnection conn,
                                const NcclCommShape& s);
// The same, summed: the bytes of `conn` on a communicator where nothing
// was connected.
std::int64_t nccl_connection_bytes(const NcclFootprintConfig& c, NcclConnection conn,
                                   const NcclCommShape& s);
// What init connects when connections do not wait for first use: rings,
// trees, PAT (one rank per node), NVLS and NVLS trees where supported, and
// the proxy's shared network send pool (in GPU memory, even on one node).
NcclLinks nccl_eager_links(const NcclFootprintConfig& c, const NcclCommShape& s);

// GPU memory as cudaGetDeviceProperties().totalGlobalMem reports it, which
// PyTorch prints as "total capacity" (GPU preset names of
// compute/gpu_spec.h); 0 for an unknown name.
std::int64_t usable_device_bytes(std::string_view gpu);
// The same; the name memory_model's callers use.
std::int64_t gpu_total_memory(std::string_view gpu);
// The CUDA context of a PyTorch process with CUDA 12 and lazy module
// loading (an estimate from reports); 0 for an unknown name. cuBLAS and
// cuBLASLt workspaces come from the caching allocator (PyTorch 2.0+) and
// are not part of it.
std::int64_t cuda_context_bytes(std::string_view gpu);

}  // namespace prism
