#!/usr/bin/python3
"""Tuned PyTorch CPU version of `degnn bench train`: the honest baseline of issue 15 target 1.

The same training as scripts/torch_reference.py (same dataset files, batches of 1024 seeds, seed-first
uniform sampling without replacement at fanouts 10,25, 2-layer GraphSAGE-mean, hidden 128, dropout
0.5, Adam lr 0.003, 2 threads), written the way a user who knows PyTorch would tune it. Each tuning
can be turned off, so its share can be measured one at a time:

  --sampler floyd      Floyd's algorithm across all rows at once: k vectorised draws per frontier,
                       rows with degree <= k taken whole (the reference shuffles every candidate
                       edge with a random key and a sort)                        [off: --sampler sort]
  --aggregate bag      F.embedding_bag(mode="mean") on the block's CSR (offsets per destination)
                       instead of index_select + index_add_ + a division     [off: --aggregate add]
  --prefetch 2         a background thread samples and gathers the next batches (a bounded queue
                       of 2) while the main thread computes; the compute then gets the other
                       --threads - 1 threads (torch and OpenBLAS), so the two do not fight over
                       the cores                                                  [off: --prefetch 0]
  --relabel mark       new sources found by marking a node-sized array and reading it back with
                       nonzero (the same ascending ids) instead of torch.unique's sort
                                                                             [off: --relabel unique]
  --dropout-mask uniform  the keep mask drawn with uniform_ instead of F.dropout's bernoulli_
                       (the same distribution; 38% of the compute time in torch 1.13 here)
                                                                   [off: --dropout-mask bernoulli]
  BLAS and malloc are chosen outside Python, by scripts/bench_vs_torch.sh: OpenBLAS instead of
  Debian's reference BLAS (LD_LIBRARY_PATH), and jemalloc with its decay off (LD_PRELOAD,
  MALLOC_CONF), so freed batch tensors' pages are reused instead of faulted in afresh each batch
  (a 66 MB feature gather: about 200 ms allocating its output, 9 ms into a reused one, on this machine).

Both samplers keep a reusable global-to-local id array (reset after use) for relabelling. Loading
(numpy, cached as .npy beside the dataset by the reference) is not timed. An epoch is timed from
the first batch's sampling to the last optimiser step. Prints one line per epoch to stderr and one
JSON line at the end: {"bench":"train_torch_tuned", ..., "median_epoch_s": ...}.

    /usr/bin/python3 scripts/torch_tuned.py [--data DIR] [--epochs 3] [--max-batches 0]
"""
import json
import os
import queue
import resource
import sys
import threading
import time


def compute_threads(threads, prefetch):
    """Threads for the compute when a prefetching thread takes one core: the rest, at least one."""
    return max(1, threads - 1) if prefetch > 0 else threads


def blas_threads_from_argv(argv):
    """OpenBLAS reads its thread count once, when torch loads it: set it from --threads and
    --prefetch before the import, so BLAS, torch and the prefetching thread share the cores
    instead of fighting over them."""
    value = {"--threads": 2, "--prefetch": 2}
    for i, a in enumerate(argv):
        for k in value:
            if a == k and i + 1 < len(argv):
                value[k] = int(argv[i + 1])
            elif a.startswith(k + "="):
                value[k] = int(a.split("=", 1)[1])
    return compute_threads(value["--threads"], value["--prefetch"])


os.environ.setdefault("OPENBLAS_NUM_THREADS", str(blas_threads_from_argv(sys.argv[1:])))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import SAGE, Sampler, bench_arguments, load_dataset  # noqa: E402


class FloydSampler(Sampler):
    """Uniform picks without replacement, every row of a frontier at once; blocks as CSR
    (number of destinations, picks' local ids, offsets per destination, counts)."""

    def __init__(self, indptr, indices, num_nodes, relabel="mark"):
        super().__init__(indptr, indices, num_nodes)
        self.mark = torch.zeros(num_nodes, dtype=torch.bool) if relabel == "mark" else None

    def relabel(self, dst, picked):
        """As Sampler.relabel, but the new sources come from marks in a node-sized array read
        back with nonzero (ascending, as torch.unique returns them) instead of a sort."""
        if self.mark is None:
            return super().relabel(dst, picked)
        nd = len(dst)
        self.local[dst] = torch.arange(nd)
        self.mark[picked[self.local[picked] < 0]] = True
        new = self.mark.nonzero().squeeze(1)
        self.mark[new] = False
        self.local[new] = torch.arange(nd, nd + len(new))
        src_nodes = torch.cat([dst, new])
        picked_local = self.local[picked]
        self.local[src_nodes] = -1
        return src_nodes, picked_local

    def sample_layer(self, dst, k):
        start = self.indptr[dst]
        deg = self.indptr[dst + 1] - start
        count = torch.clamp(deg, max=k)
        offsets = torch.zeros(len(dst) + 1, dtype=torch.int64)
        torch.cumsum(count, 0, out=offsets[1:])
        pos = torch.empty(int(offsets[-1]), dtype=torch.int64)  # edge positions in `indices`
        whole = (deg <= k).nonzero().squeeze(1)
        if len(whole):
            d = deg[whole]
            row = torch.repeat_interleave(torch.arange(len(whole)), d)
            within = torch.arange(int(d.sum())) - (torch.cumsum(d, 0) - d)[row]
            pos[offsets[whole][row] + within] = start[whole][row] + within
        some = (deg > k).nonzero().squeeze(1)
        if len(some):
            # Floyd: for j = n-k .. n-1 draw t in [0, j]; if t was drawn already take j itself.
            n = deg[some]
            picks = torch.empty((len(some), k), dtype=torch.int64)
            for j in range(k):
                hi = n - k + j
                t = (torch.rand(len(some), dtype=torch.float64) * (hi + 1)).long()
                if j:
                    t = torch.where((picks[:, :j] == t.unsqueeze(1)).any(1), hi, t)
                picks[:, j] = t
            pos[(offsets[some].unsqueeze(1) + torch.arange(k)).reshape(-1)] = (
                start[some].unsqueeze(1) + picks).reshape(-1)
        src_nodes, picked_local = self.relabel(dst, self.indices[pos])
        return src_nodes, picked_local, offsets, count


def to_csr_block(block):
    """A reference block (destination of each edge, grouped by destination) as offsets + sources."""
    nd, dst_idx, src_idx, count = block
    offsets = torch.zeros(nd + 1, dtype=torch.int64)
    torch.cumsum(count, 0, out=offsets[1:])
    return nd, src_idx, offsets, count


class BagSAGELayer(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.self_lin = nn.Linear(fin, fout)
        self.neigh_lin = nn.Linear(fin, fout, bias=False)

    def forward(self, h, block):
        nd, src_idx, offsets, _ = block
        # One fused gather-and-mean; an empty bag (no in-neighbours) is a zero row.
        agg = F.embedding_bag(src_idx, h, offsets[:-1], mode="mean")
        return self.self_lin(h[:nd]) + self.neigh_lin(agg)


def uniform_dropout(h, p):
    """Dropout with the keep mask drawn as uniform floats >= p (kept entries scaled by 1/(1-p)):
    the same distribution as F.dropout, whose bernoulli_ draws took 38% of this script's compute
    time in torch 1.13 on this machine (torch.profiler; a uniform_ mask is several times faster)."""
    return h * (torch.empty_like(h).uniform_() >= p).to(h.dtype).mul_(1.0 / (1.0 - p))


class TunedSAGE(SAGE):
    """SAGE with a layer class of choice and, with mask="uniform", uniform_dropout."""

    def __init__(self, fin, hidden, classes, layers, dropout, layer=None, mask="uniform"):
        super().__init__(fin, hidden, classes, layers, dropout)
        if layer is not None:
            dims = [fin] + [hidden] * (layers - 1) + [classes]
            self.layers = nn.ModuleList(layer(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.mask = mask

    def forward(self, x, blocks):
        if self.mask != "uniform":
            return super().forward(x, blocks)
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(h, block)
            if i + 1 < len(self.layers):
                h = F.relu(h)
                if self.training and self.dropout > 0:
                    h = uniform_dropout(h, self.dropout)
        return h


def main():
    ap = bench_arguments(__doc__.split("\n")[0])
    ap.add_argument("--sampler", choices=["floyd", "sort"], default="floyd")
    ap.add_argument("--aggregate", choices=["bag", "add"], default="bag")
    ap.add_argument("--prefetch", type=int, default=2, help="batches sampled ahead (0: none)")
    ap.add_argument("--relabel", choices=["mark", "unique"], default="mark")
    ap.add_argument("--dropout-mask", choices=["uniform", "bernoulli"], default="uniform")
    args = ap.parse_args()
    torch.set_num_threads(compute_threads(args.threads, args.prefetch))
    torch.manual_seed(1)

    indptr, indices, feats, labels, train, n = load_dataset(args.data)
    classes = int(labels.max()) + 1
    fanouts = [int(f) for f in args.fanouts.split(",")]
    floyd = args.sampler == "floyd"
    sampler = FloydSampler(indptr, indices, n, args.relabel) if floyd else Sampler(indptr, indices, n)
    bag = args.aggregate == "bag"
    model = TunedSAGE(feats.shape[1], args.hidden, classes, len(fanouts), 0.5,
                      BagSAGELayer if bag else None, args.dropout_mask)
    opt = torch.optim.Adam(model.parameters(), lr=0.003)
    model.train()
    print(f"torch tuned: {n} nodes, {len(indices)} in-edges; sampler {args.sampler}, aggregate "
          f"{args.aggregate}, prefetch {args.prefetch}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads", file=sys.stderr)

    def prepare(seeds):
        inputs, blocks = sampler.sample(seeds, fanouts)
        if floyd and not bag:  # the reference layer wants each edge's destination row
            blocks = [(nd, torch.repeat_interleave(torch.arange(nd), count), src, count)
                      for nd, src, _, count in blocks]
        elif not floyd and bag:
            blocks = [to_csr_block(b) for b in blocks]
        return feats.index_select(0, inputs), labels.index_select(0, seeds), blocks

    epoch_s, wait_s = [], []
    for epoch in range(args.epochs):
        batches = torch.split(train[torch.randperm(len(train))], args.batch_size)
        if args.max_batches:
            batches = batches[: args.max_batches]
        t_epoch = time.perf_counter()
        waited = 0.0
        if args.prefetch > 0:
            q = queue.Queue(maxsize=args.prefetch)

            def produce(batches=batches, q=q):
                for seeds in batches:  # torch ops release the GIL: this overlaps the compute
                    q.put(prepare(seeds))

            worker = threading.Thread(target=produce, daemon=True)
            worker.start()
            take = q.get
        else:
            it = iter(batches)
            take = lambda: prepare(next(it))  # noqa: E731
        for _ in batches:
            t = time.perf_counter()
            x, y, blocks = take()
            waited += time.perf_counter() - t
            opt.zero_grad()
            loss = F.cross_entropy(model(x, blocks), y)
            loss.backward()
            opt.step()
        if args.prefetch > 0:
            worker.join()
        epoch_s.append(time.perf_counter() - t_epoch)
        wait_s.append(waited)
        print(f"  epoch {epoch + 1}: {epoch_s[-1]:.2f} s (waiting for batches {waited:.2f}), "
              f"{len(batches)} batches, loss {loss.item():.4f}", file=sys.stderr)

    med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
    print(json.dumps({
        "bench": "train_torch_tuned", "dataset": os.path.basename(os.path.normpath(args.data)),
        "sampler": args.sampler, "aggregate": args.aggregate, "prefetch": args.prefetch,
        "blas": os.environ.get("DEGNN_TORCH_BLAS", "default"),
        "malloc": os.environ.get("DEGNN_TORCH_MALLOC", "glibc"),
        "batch_size": args.batch_size, "hidden": args.hidden, "epochs": args.epochs,
        "batches_per_epoch": len(batches), "threads": torch.get_num_threads(),
        "torch": torch.__version__, "median_epoch_s": round(med(epoch_s), 4),
        "median_wait_s": round(med(wait_s), 4),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))


if __name__ == "__main__":
    main()
