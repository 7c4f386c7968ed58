#!/usr/bin/env python3
"""Rebuilds a DEGNN model file (degnn export, train --save-model) in plain PyTorch and runs
full-neighbour inference on a dataset in the OGB raw layout, as `degnn infer` does.

Needs only NumPy and PyTorch (Debian: python3-numpy python3-torch); no PyG or DGL. The layers are
written out here so the file's layout is documented by code (docs/model_use.md):
  SAGE (mean): out = h W_self^T + mean_{u -> v} h_u W_neigh^T + b   (fc_self, fc_neigh: (out, in))
  GCN:         out = (sum_{u -> v} h_u / sqrt((d_v + 1)(d_u + 1)) + h_v / (d_v + 1)) W + b
               (weight: (in, out), d: in-degree)
  GAT:         z = h W^T split into H heads of F (fc: (H*F, in)); per head and edge u -> v,
               including v -> v, e = LeakyReLU_0.2(attn_l . z_u + attn_r . z_v), alpha the
               softmax of e over v's edges, head out = sum alpha z_u + bias (attn_l, attn_r:
               (1, H, F), bias: (H*F)); hidden layers concatenate the heads, the last averages
with ReLU between layers and no dropout.

  scripts/pytorch_model.py --model M.safetensors --data data/cora [--compare OUT/logits.npy]
      [--write-npz M2.npz]
--compare: exits 1 unless every logit is within --tolerance (default 1e-4) of degnn infer's.
--write-npz: writes the PyTorch model's state dict back with numpy.savez in the same layout (the
way back: `degnn train --init M2.npz`).
"""
import argparse
import gzip
import json
import os
import struct
import sys

import numpy as np
import torch
from torch import nn

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "U8": np.uint8}


def load_model_file(path):
    """(settings dict of strings, {name: np.ndarray}) from a safetensors or npz model file."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head == b"PK\x03\x04":
        z = np.load(path)
        settings = json.loads(z["degnn_settings"].tobytes())
        return settings, {k: z[k] for k in z.files if k != "degnn_settings"}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    settings = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        tensors[name] = np.frombuffer(data[b:e], dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
    return settings, tensors


def read_csv(path, dtype):
    with gzip.open(path, "rt") as f:
        return np.loadtxt(f, delimiter=",", dtype=dtype, ndmin=2)


def load_graph(folder):
    """Features (n, f) float32 and the in-edges (src, dst) after symmetrizing and de-duplication,
    as DEGNN's loader builds them (an undirected dataset unless dataset.ini says directed)."""
    feats = read_csv(os.path.join(folder, "node-feat.csv.gz"), np.float32)
    n = feats.shape[0]
    edges = read_csv(os.path.join(folder, "edge.csv.gz"), np.int64).reshape(-1, 2)
    directed = False
    ini = os.path.join(folder, "dataset.ini")
    if os.path.exists(ini):
        # As DEGNN's loader reads it: `directed = true`, spaces, tabs and quotes allowed.
        for line in open(ini):
            key, _, value = line.partition("=")
            if key.strip() == "directed":
                directed = value.strip().strip('"') == "true"
    src, dst = edges[:, 0], edges[:, 1]
    if not directed:
        loops = src == dst
        src, dst = np.concatenate([src, dst[~loops]]), np.concatenate([dst, src[~loops]])
    pairs = np.unique(dst * n + src)  # one in-edge u -> v per (v, u)
    return torch.from_numpy(feats), torch.from_numpy(pairs % n), torch.from_numpy(pairs // n), n


class SageLayer(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc_self = nn.Linear(d_in, d_out, bias=False)
        self.fc_neigh = nn.Linear(d_in, d_out, bias=False)
        self.bias = nn.Parameter(torch.zeros(d_out))

    def forward(self, graph, h):
        return self.fc_self(h) + self.fc_neigh(torch.sparse.mm(graph["mean"], h)) + self.bias


class GcnLayer(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_in, d_out))
        self.bias = nn.Parameter(torch.zeros(d_out))

    def forward(self, graph, h):
        return (torch.sparse.mm(graph["gcn"], h) + graph["self"] * h) @ self.weight + self.bias


class GatLayer(nn.Module):
    def __init__(self, d_in, heads, width, concat):
        super().__init__()
        self.heads, self.width, self.concat = heads, width, concat
        self.fc = nn.Linear(d_in, heads * width, bias=False)
        self.attn_l = nn.Parameter(torch.zeros(1, heads, width))
        self.attn_r = nn.Parameter(torch.zeros(1, heads, width))
        self.bias = nn.Parameter(torch.zeros(heads * width))

    def forward(self, graph, h):
        n, H, F = h.shape[0], self.heads, self.width
        z = self.fc(h).view(n, H, F)
        el, er = (z * self.attn_l).sum(-1), (z * self.attn_r).sum(-1)  # (n, H)
        src, dst = graph["gat_src"], graph["gat_dst"]  # every in-edge and each node's own
        e = torch.nn.functional.leaky_relu(el[src] + er[dst], 0.2)  # (edges, H)
        top = torch.full((n, H), -float("inf")).scatter_reduce(
            0, dst.unsqueeze(1).expand(-1, H), e, "amax")
        w = torch.exp(e - top[dst])
        total = torch.zeros(n, H).index_add_(0, dst, w)
        out = torch.zeros(n, H, F).index_add_(0, dst, w.unsqueeze(-1) * z[src])
        out = out / total.unsqueeze(-1) + self.bias.view(1, H, F)
        return out.reshape(n, H * F) if self.concat else out.mean(1)


class Model(nn.Module):
    def __init__(self, settings):
        super().__init__()
        L, d_in = int(settings["layers"]), int(settings["in_dim"])
        hidden, classes = int(settings["hidden"]), int(settings["num_classes"])
        widths = [d_in] + [hidden] * (L - 1) + [classes]
        if settings["model"] == "gat":
            heads, out_heads = int(settings["heads"]), int(settings["output_heads"])
            self.layers = nn.ModuleList(
                GatLayer(widths[i], heads, hidden // heads, True) if i + 1 < L
                else GatLayer(widths[i], out_heads, classes, False) for i in range(L))
            return
        layer = GcnLayer if settings["model"] == "gcn" else SageLayer
        self.layers = nn.ModuleList(layer(widths[i], widths[i + 1]) for i in range(L))

    def forward(self, graph, h):
        for i, layer in enumerate(self.layers):
            h = layer(graph, h)
            if i + 1 < len(self.layers):
                h = torch.relu(h)
        return h


def graph_operators(src, dst, n):
    deg = torch.bincount(dst, minlength=n).to(torch.float64)
    idx = torch.stack([dst, src])
    mean = torch.where(deg > 0, 1.0 / deg.clamp(min=1), torch.zeros_like(deg))[dst]
    inv = 1.0 / torch.sqrt(deg + 1.0)
    gcn = inv[dst] * inv[src]
    as_sparse = lambda v: torch.sparse_coo_tensor(idx, v.to(torch.float32), (n, n)).coalesce()
    nodes = torch.arange(n)
    return {"mean": as_sparse(mean), "gcn": as_sparse(gcn),
            "self": (inv * inv).to(torch.float32).unsqueeze(1),
            "gat_src": torch.cat([nodes, src]), "gat_dst": torch.cat([nodes, dst])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--compare", help="degnn infer's logits.npy (every node, in node order)")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--write-npz", help="write the PyTorch state dict back in the same layout")
    args = ap.parse_args()

    settings, tensors = load_model_file(args.model)
    model = Model(settings)
    state = {k: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in tensors.items()}
    model.load_state_dict(state, strict=True)  # names and shapes must match exactly
    model.eval()
    feats, src, dst, n = load_graph(args.data)
    if settings.get("normalize_features", "none") == "row":
        feats = feats / feats.abs().sum(1, keepdim=True).clamp(min=torch.finfo(torch.float32).tiny)
    with torch.no_grad():
        logits = model(graph_operators(src, dst, n), feats).numpy()
    labels = read_csv(os.path.join(args.data, "node-label.csv.gz"), np.int64).ravel()
    test = read_csv(os.path.join(args.data, "split", "test.csv.gz"), np.int64).ravel()
    acc = float((logits[test].argmax(1) == labels[test]).mean())
    print(f"pytorch: {settings['model']}, {settings['layers']} layers, {n} nodes, "
          f"test accuracy {acc:.4f}")
    status = 0
    if args.compare:
        theirs = np.load(args.compare)
        if theirs.shape != logits.shape:
            print(f"pytorch: logits shape {logits.shape}, degnn's {theirs.shape}")
            return 1
        diff = float(np.abs(theirs - logits).max())
        same = int((theirs.argmax(1) == logits.argmax(1)).sum())
        print(f"pytorch: max |logit difference| to degnn infer {diff:.3g} "
              f"(tolerance {args.tolerance:g}); same predicted class for {same} of {n} nodes")
        status = 0 if diff <= args.tolerance else 1
    if args.write_npz:
        arrays = {k: v.detach().numpy() for k, v in model.state_dict().items()}
        arrays["degnn_settings"] = np.frombuffer(json.dumps(settings).encode(), dtype=np.uint8)
        np.savez(args.write_npz, **arrays)
        print(f"pytorch: wrote {args.write_npz}")
    return status


if __name__ == "__main__":
    sys.exit(main())
