# Wire schemas of every DEGNN message that may cross a node. Each root struct starts with a
# Header (protocol version, cluster id), so a peer of another version or cluster is rejected.
# Fields are never removed or renumbered: one that is no longer used is renamed obsolete*.
# Bulk float data travels as Data (little-endian float32, row-major) for speed; ids as List(Int32).
@0xc4e1a3f2b5d60718;

struct Header {
  version @0 :UInt16;    # protocol version, see serialization/wire.hpp kProtocolVersion
  clusterId @1 :UInt64;  # all nodes of one training run share it
  step @2 :UInt64;       # global step the message belongs to (0 for control)
  sender @3 :Int32;      # partition / worker id of the sender
  viewId @4 :UInt16;     # membership view the sender was in (in a free slot: no byte more)
}

# -- centralized pipeline: sampling and feature pulls --

struct SampleRequest {
  header @0 :Header;
  layer @1 :UInt8;       # hop, seed-first (0 = neighbours of the seeds)
  fanout @2 :Int32;      # -1 = all in-neighbours
  seed @3 :UInt64;       # run seed; with step, layer and node id it fixes the pick
  nodes @4 :List(Int32); # global ids, all owned by the receiver
}

struct SampleResponse {
  header @0 :Header;
  counts @1 :List(Int32);     # sampled in-neighbours per requested node, in request order
  neighbors @2 :List(Int32);  # global ids, concatenated
  degrees @3 :List(Int32);    # full in-degree per requested node
}

struct FeatureRequest {
  header @0 :Header;
  nodes @1 :List(Int32);
}

struct FeatureResponse {
  header @0 :Header;
  rows @1 :UInt32;
  cols @2 :UInt32;
  values @3 :Data;            # rows * cols float32
  degrees @4 :List(Int32);    # feature pulls: full in-degree of each row's node (GCN needs it)
}

# -- layer-wise evaluation: halo rows of h^(l) --

struct HaloRequest {
  header @0 :Header;
  layer @1 :UInt8;
  nodes @2 :List(Int32);
  bits @3 :UInt8;             # 0 or 32: exact float32 rows; else quantized at these bits (the
                              # decentralized history set-up at --history-setup quantized)
}

struct QuantizedHaloResponse { # answer to a HaloRequest whose bits are below 32 (its own struct
                               # so that FeatureResponse, on every feature pull, stays as small)
  header @0 :Header;
  rows @1 :UInt32;
  cols @2 :UInt32;
  bits @3 :UInt8;             # 16, 8, 4, 2: each row quantized as in EmbeddingRows
  codes @4 :Data;
  rowMin @5 :List(Float32);
  rowScale @6 :List(Float32);
  degrees @7 :List(Int32);    # full in-degree of each row's node
}

# -- decentralized pipeline (DESIGN.md sections 1-2) --

struct ComputationPush {
  header @0 :Header;
  layer @1 :UInt8;            # layer whose input the receiver prepares
  targets @2 :List(Int32);    # batch nodes the partial sums are for
  counts @3 :List(Int32);     # per target: how many of its sampled neighbours live here
  neighbors @4 :List(Int32);  # concatenated neighbour ids (owned by the receiver)
  obsoleteFanouts @5 :List(Int32);  # never written: a shard expands with the run's fanouts
  rows @6 :List(Int32);       # nodes (owned by the receiver) whose own h^(layer) row is wanted:
                              # the batch owner's seeds, for their self term
  applies @7 :UInt64;         # averaged gradients the receiver must have applied before it
                              # computes: the weights of this step
}

struct PartialAggregate {
  header @0 :Header;
  rows @1 :UInt32;
  cols @2 :UInt32;
  sums @3 :Data;              # per target: sum of h^(layer) of its neighbours here (float32)
  counts @4 :List(Int32);
  ownRows @5 :Data;           # the push's `rows`, in its order, (count x cols) float32
}

struct GradientReturn {
  header @0 :Header;
  rows @1 :UInt32;
  cols @2 :UInt32;
  grads @3 :Data;             # gradient of each partial sum
  ownGrads @4 :Data;          # gradient of each of the push's own rows (count x cols) float32
}

# -- decentralized GAT (DESIGN.md section 2; docs/design.md section 2) --
# A target's attention weights need its own er = a_r . z_v, known to its owner only once the
# owner's own shard answered the step's ComputationPush with the target's row (the first push's
# PartialAggregate then carries ownRows and no sums). Then, per step and shard, one round each:

struct AttentionPush {         # owner -> shard: the second push of a step
  header @0 :Header;
  applies @1 :UInt64;          # the step's weights, as its ComputationPush named them
  heads @2 :UInt32;
  er @3 :Data;                 # per target of the ComputationPush, per head: a_r . z (float32)
}

struct AttentionPartial {      # its answer: per target and head the softmax partial
  header @0 :Header;
  heads @1 :UInt32;
  rows @2 :UInt32;             # targets
  cols @3 :UInt32;             # heads x F
  values @4 :Data;             # sum_k exp(score_k - max) keep_k z_k (rows x cols float32)
  scoreMax @5 :Data;           # largest score (rows x heads float32)
  expSum @6 :Data;             # sum_k exp(score_k - max) (rows x heads float32)
}

struct AttentionReturn {       # owner -> shard: what the shard's backward needs; the shard's
  header @0 :Header;           # answer is an AttentionReturn too, grads = d loss / d er
  heads @1 :UInt32;            # (rows x heads) and nothing else. The own rows' gradient follows
  rows @2 :UInt32;             # in a GradientReturn without grads once every shard answered.
  cols @3 :UInt32;
  grads @4 :Data;              # d loss / d each target's attention output (rows x cols float32)
  scoreMax @5 :Data;           # the merged softmax's largest score and sum (rows x heads each)
  expSum @6 :Data;
  headsOut @7 :Data;           # the attention outputs (rows x cols float32)
}

# -- historical embeddings --

struct EmbeddingGet {
  header @0 :Header;
  layer @1 :UInt8;
  nodes @2 :List(Int32);
  obsoleteSince @3 :UInt64;   # never written: `held` says which rows the asker has
  held @4 :List(UInt64);      # empty, or per node the version the asker holds: only newer
                              # rows come back (~0: holds none)
}

struct EmbeddingRows {        # answer to EmbeddingGet; float32, the body of a shard's put to its
                              # own embedding store
  header @0 :Header;
  layer @1 :UInt8;
  bits @2 :UInt8;             # 32 = float32, else quantized per row with min and scale
  nodes @3 :List(Int32);
  versions @4 :List(UInt64);  # per row: step + 1 of the step that computed it (0: the initial
                              # exact pass)
  cols @5 :UInt32;
  payload @6 :Data;
  rowMin @7 :List(Float32);
  rowScale @8 :List(Float32);
}

# A run on compressed feature rows (--sparse-features): the answer to a FeatureRequest, to a
# HaloRequest of layer 0 and to an EmbeddingGet of level 0 (its own struct, so that the dense
# answers stay as small). Its rows are those asked, in the order asked.
struct SparseRows {
  header @0 :Header;
  cols @1 :UInt32;
  counts @2 :List(Int32);     # non-zeros per row
  columns @3 :List(Int32);    # column of each non-zero, ascending within its row
  values @4 :Data;            # float32 per non-zero
  degrees @5 :List(Int32);    # feature and halo answers: each row's node's full in-degree
  nodes @6 :List(Int32);      # embedding answers: the rows' global ids
}

# -- data-parallel training --

struct AllReduceChunk {
  header @0 :Header;
  round @1 :UInt32;           # 0 a worker's gradient, 1 the average; in the ring its round
  obsoleteOffset @2 :UInt64;  # never written: a chunk's place follows from its round
  values @3 :Data;            # float32
  loss @4 :Float64;           # statistics of the step that made this gradient (summed over seeds)
  seeds @5 :UInt32;           # in the ring: the workers with seeds summed into the chunk
  correct @6 :UInt32;
}

struct Control {
  header @0 :Header;
  kind @1 :Kind;
  epoch @2 :UInt32;
  value @3 :Float64;          # step: the batch index
  text @4 :Text;              # trace: the actor's stage spans as Chrome trace events
  counts @5 :List(UInt64);    # results: accuracy counts, traffic counters
  ring @6 :Bool;              # step, gradient: the workers all-reduce in a ring and apply
  enum Kind {
    step @0;
    epoch @1;                 # unused since readiness moved to the node actor (runtime/)
    evaluate @2;              # epoch = layer; counts = [1]: a layer of the history set-up
    checkpoint @3;            # parameters, or (save) snapshot and persist the replica
    shutdown @4;              # unused: the node actor stops a node
    result @5;
    gradient @6;
    refresh @7;
    initHistory @8;
    trace @9;                 # the timeline of stages, as Chrome trace events in `text`
    commit @10;               # checkpoint: every replica confirmed; counts = size, CRC-32
    settings @11;             # settings safe to change between steps: counts = [staleness]
  }
}

# -- membership: joining a cluster through its seed (runtime/, before any training message) --

struct JoinRequest {
  header @0 :Header;          # clusterId: the joiner's own (the seed names a differing setting)
  identity @1 :List(Text);    # settings that must agree, key=value (runtime/train/cluster_identity.hpp)
  host @2 :Text;              # where the joiner's node actor listens
  port @3 :UInt16;
  rankHint @4 :Int32;         # the rank it asks for (Slurm's task id), -1 for none
  name @5 :Text;              # the joiner's name in logs and views
  certificate @6 :Text;       # with TLS: the joiner's certificate (PEM); its name is the name
  signature @7 :Data;         # with TLS: the seed's challenge signed with the certificate's key
  tokenMac @8 :Data;          # with TLS: HMAC-SHA256 of the challenge with the job token
}

struct Member {
  rank @0 :Int32;
  host @1 :Text;
  port @2 :UInt16;
  name @3 :Text;
  partitions @4 :List(Int32); # the partitions this member serves
  lost @5 :Bool;              # lost in a recovery: serves nothing now, kept so ranks stay put
}

struct MembershipView {
  header @0 :Header;
  viewId @1 :UInt64;          # grows with every change of membership
  members @2 :List(Member);   # in rank order, rank 0 first (the seed)
  secret @3 :Text;            # random, made by the seed: members prove membership with it in
                              # their greetings and node 0 in its bye (travels only to members)
  resumeStep @4 :UInt64;      # 0: a fresh run; else every node restores its copy of the
                              # checkpoint taken before this global step (the seed's last commit)
  replaced @5 :List(Int32);   # ranks served by a new node in this view (a replacement that joined
                              # through the seed after a member was lost): greet it anew
}

# -- partition files streamed from the seed to a node that lacks them (runtime/) --

struct FileEntry {
  path @0 :Text;              # relative to the partition folder, e.g. part-2/partition.bin
  size @1 :UInt64;
  crc32 @2 :UInt32;           # of the whole file (zlib's CRC-32)
}

struct FileManifest {
  header @0 :Header;          # clusterId 0: fetched before the joiner's settings are known
  files @1 :List(FileEntry);
}

struct FileChunkRequest {
  header @0 :Header;
  path @1 :Text;              # a path of the manifest, exactly
  offset @2 :UInt64;
  length @3 :UInt32;          # at most 4 MiB
}

struct FileChunk {
  header @0 :Header;
  path @1 :Text;
  offset @2 :UInt64;
  data @3 :Data;
  crc32 @4 :UInt32;           # of data: a chunk damaged on the way is asked for again
}

# -- operator console (degnn console) to node 0 --

struct ConsoleRequest {
  header @0 :Header;          # clusterId 0: an operator does not know the run's settings
  command @1 :Text;           # one line, e.g. "progress"
  certificate @2 :Text;       # with TLS: the operator's certificate (operator-K), PEM
  signature @3 :Data;         # with TLS: node 0's challenge signed with its key
  tokenMac @4 :Data;          # with TLS: HMAC-SHA256 of the challenge with the job token
  challenge @5 :Data;         # through node 0's TLS console gateway: the challenge it answers
}

# A TLS console gateway's challenge (answer to its POST /challenge), signed in the next request.
struct ConsoleChallenge {
  header @0 :Header;
  challenge @1 :Data;
}

struct ConsoleReply {
  header @0 :Header;
  ok @1 :Bool;
  text @2 :Text;              # JSON (or Prometheus text for "metrics"), or the error
}
