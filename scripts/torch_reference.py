#!/usr/bin/python3
"""PyTorch CPU reference for `degnn bench train` (issue 3's speed goal: degnn >= 2x faster per epoch).

A straightforward PyTorch implementation of exactly the training that `degnn bench train` times
(runtime/cli/bench_command.cpp, bench_train):

  * the same synthetic dataset in the OGB raw layout (gz CSVs) that `degnn bench train` generates,
    by default /tmp/degnn-bench/synth-1000000-10000000-128; undirected, so the graph is the
    symmetric, deduplicated CSR of in-edges (self loops kept), as degnn's loader builds it;
  * per epoch, a random permutation of the training nodes cut into batches of 1024 seeds;
  * uniform neighbour sampling without replacement, seed-first fanouts 10,25 (10 in-neighbours of
    each seed, then 25 of each node of that frontier; all of them when the degree is smaller),
    destination nodes first among each block's sources, local relabelling;
  * 2-layer GraphSAGE-mean: h_dst W_self + b + mean(h_neighbours) W_neigh, ReLU and dropout 0.5
    between the layers, hidden 128; softmax cross-entropy on the seeds; Adam lr 0.003;
  * torch.set_num_threads(2) (the machine has 2 cores; degnn uses both through OpenMP).

It uses PyTorch the way a typical user would: vectorised tensor ops for the sampler (random keys
and a sort per frontier instead of a Python loop per node), index_select for the feature gather,
index_add_ for the neighbour sum, nn.Linear, autograd, torch.optim.Adam. Loading the CSVs (numpy,
cached as .npy next to the dataset after the first run) is not timed, as in degnn (which loads
from its binary cache). An epoch is timed from the first batch's sampling to the last optimiser
step, like degnn's epoch clock.

Run (Debian's python3-torch, hence /usr/bin/python3; generate the graph first with
`build/runtime/degnn bench train`):

    /usr/bin/python3 scripts/torch_reference.py [--data DIR] [--epochs 3] [--max-batches 0]

`--max-batches N` stops each epoch after N batches (same as degnn's option). Prints one line per
epoch to stderr and, at the end, one JSON line like degnn's:
{"bench":"train_torch", ..., "median_epoch_s": ...}.
"""
import argparse
import gzip
import json
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def load_csv(path, dtype, ndmin=1):
    with gzip.open(path, "rt") as f:
        return np.loadtxt(f, delimiter=",", dtype=dtype, ndmin=ndmin)


def cached(cache_dir, name, make):
    path = os.path.join(cache_dir, name + ".npy")
    if os.path.exists(path):
        return np.load(path)
    a = make()
    np.save(path, a)
    return a


def load_dataset(d):
    """Returns (indptr, indices, features, labels, train) as torch tensors; CSR of in-edges."""
    cache = os.path.join(d, ".torch-reference-cache")
    os.makedirs(cache, exist_ok=True)
    n = int(open_gz_first(os.path.join(d, "num-node-list.csv.gz")))
    directed = "directed = true" in open(os.path.join(d, "dataset.ini")).read() \
        if os.path.exists(os.path.join(d, "dataset.ini")) else False

    def make_csr():
        e = load_csv(os.path.join(d, "edge.csv.gz"), np.int64, ndmin=2)
        src, dst = e[:, 0], e[:, 1]
        if not directed:
            loop = src == dst
            src, dst = np.concatenate([src, dst[~loop]]), np.concatenate([dst, src[~loop]])
        key = np.unique(dst * n + src)  # sorted by destination, then source; deduplicated
        dst, src = key // n, key % n
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
        return np.concatenate([indptr, src])  # one array: indptr (n+1) then indices

    csr = cached(cache, "csr", make_csr)
    indptr, indices = csr[: n + 1], csr[n + 1:]
    feats = cached(cache, "features",
                   lambda: load_csv(os.path.join(d, "node-feat.csv.gz"), np.float32, ndmin=2))
    labels = cached(cache, "labels", lambda: load_csv(os.path.join(d, "node-label.csv.gz"), np.int64))
    train = cached(cache, "train", lambda: load_csv(os.path.join(d, "split", "train.csv.gz"), np.int64))
    return (torch.from_numpy(indptr), torch.from_numpy(indices), torch.from_numpy(feats),
            torch.from_numpy(labels.reshape(-1)), torch.from_numpy(train.reshape(-1)), n)


def open_gz_first(path):
    with gzip.open(path, "rt") as f:
        return f.readline().strip()


class Sampler:
    """Uniform neighbour sampling without replacement, one block per layer, seed-first fanouts."""

    def __init__(self, indptr, indices, num_nodes):
        self.indptr, self.indices = indptr, indices
        self.local = torch.full((num_nodes,), -1, dtype=torch.int64)  # global -> local, reset after use

    def sample_layer(self, dst, k):
        start = self.indptr[dst]
        deg = self.indptr[dst + 1] - start
        row = torch.repeat_interleave(torch.arange(len(dst)), deg)
        row_start = torch.cumsum(deg, 0) - deg
        pos = torch.arange(int(deg.sum())) - row_start[row]  # position within the row
        # A random key per candidate edge; sorting by (row, key) shuffles each row in place, and
        # the first min(deg, k) of each row are a uniform sample without replacement.
        order = torch.argsort(row.double() + torch.rand(len(row), dtype=torch.float64))
        keep = pos < k
        picked_row = row[keep]
        picked = self.indices[(start[row] + pos)[order][keep]]
        count = torch.clamp(deg, max=k)
        src_nodes, picked_local = self.relabel(dst, picked)
        return src_nodes, picked_row, picked_local, count

    def relabel(self, dst, picked):
        """Destinations take locals 0..num_dst-1, new sources follow; (sources, picks' locals)."""
        nd = len(dst)
        self.local[dst] = torch.arange(nd)
        new = torch.unique(picked[self.local[picked] < 0])
        self.local[new] = torch.arange(nd, nd + len(new))
        src_nodes = torch.cat([dst, new])
        picked_local = self.local[picked]
        self.local[src_nodes] = -1
        return src_nodes, picked_local

    def sample(self, seeds, fanouts):
        blocks, frontier = [], seeds
        for k in fanouts:  # seed-first: the first fanout builds the last block
            src_nodes, *block = self.sample_layer(frontier, k)
            blocks.insert(0, (len(frontier), *block))
            frontier = src_nodes
        return frontier, blocks  # frontier = input nodes of the first block


class SAGELayer(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.self_lin = nn.Linear(fin, fout)
        self.neigh_lin = nn.Linear(fin, fout, bias=False)

    def forward(self, h, block):
        nd, dst_idx, src_idx, count = block
        agg = torch.zeros(nd, h.shape[1]).index_add_(0, dst_idx, h.index_select(0, src_idx))
        agg = agg / count.clamp(min=1).unsqueeze(1).to(h.dtype)
        return self.self_lin(h[:nd]) + self.neigh_lin(agg)


class SAGE(nn.Module):
    def __init__(self, fin, hidden, classes, layers, dropout):
        super().__init__()
        dims = [fin] + [hidden] * (layers - 1) + [classes]
        self.layers = nn.ModuleList(SAGELayer(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    def forward(self, x, blocks):
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(h, block)
            if i + 1 < len(self.layers):
                h = F.dropout(F.relu(h), self.dropout, self.training)
        return h


def bench_arguments(description):
    """The options both PyTorch versions share (those of `degnn bench train`)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--data", default="/tmp/degnn-bench/synth-1000000-10000000-128")
    ap.add_argument("--fanouts", default="10,25")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--max-batches", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    return ap


def main():
    args = bench_arguments(__doc__.split("\n")[0]).parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)

    t0 = time.perf_counter()
    indptr, indices, feats, labels, train, n = load_dataset(args.data)
    classes = int(labels.max()) + 1
    print(f"torch reference: loaded {args.data} ({n} nodes, {len(indices)} in-edges, "
          f"{feats.shape[1]} features, {classes} classes, {len(train)} train) in "
          f"{time.perf_counter() - t0:.1f} s; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads", file=sys.stderr)
    fanouts = [int(f) for f in args.fanouts.split(",")]
    sampler = Sampler(indptr, indices, n)
    model = SAGE(feats.shape[1], args.hidden, classes, len(fanouts), 0.5)
    opt = torch.optim.Adam(model.parameters(), lr=0.003)
    model.train()

    epoch_s, sample_s, compute_s, edges = [], [], [], 0
    for epoch in range(args.epochs):
        batches = torch.split(train[torch.randperm(len(train))], args.batch_size)
        if args.max_batches:
            batches = batches[: args.max_batches]
        ts = tc = 0.0
        t_epoch = time.perf_counter()
        for seeds in batches:
            t = time.perf_counter()
            inputs, blocks = sampler.sample(seeds, fanouts)
            x = feats.index_select(0, inputs)
            y = labels.index_select(0, seeds)
            ts += time.perf_counter() - t
            t = time.perf_counter()
            opt.zero_grad()
            loss = F.cross_entropy(model(x, blocks), y)
            loss.backward()
            opt.step()
            tc += time.perf_counter() - t
            edges += sum(len(b[1]) for b in blocks)
        epoch_s.append(time.perf_counter() - t_epoch)
        sample_s.append(ts)
        compute_s.append(tc)
        print(f"  epoch {epoch + 1}: {epoch_s[-1]:.2f} s (sample {ts:.2f}, compute {tc:.2f}), "
              f"{len(batches)} batches, loss {loss.item():.4f}", file=sys.stderr)

    med = lambda v: sorted(v)[len(v) // 2]
    print(json.dumps({
        "bench": "train_torch", "dataset": os.path.basename(os.path.normpath(args.data)),
        "nodes": n, "edges": len(indices), "batch_size": args.batch_size, "hidden": args.hidden,
        "epochs": args.epochs, "batches_per_epoch": len(batches), "threads": torch.get_num_threads(),
        "torch": torch.__version__, "median_epoch_s": round(med(epoch_s), 4),
        "median_sample_s": round(med(sample_s), 4), "median_compute_s": round(med(compute_s), 4),
        "sampled_edges_per_s": round(edges / sum(epoch_s)),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))


if __name__ == "__main__":
    main()
