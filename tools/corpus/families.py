"""Parameterised program families for the compiler corpus. Each family draws its cases from a seeded RNG over a
wide size range (including sizes that are not multiples of 128) and builds (function, argument specs, donate).
Analysis only; never run by tests or CI."""
import math

import jax
import jax.numpy as jnp
from jax import lax

DT = {"bf16": jnp.bfloat16, "f32": jnp.float32, "int8": jnp.int8, "fp8": jnp.float8_e4m3fn}


def logint(rng, lo, hi, align=None):
    """A log-uniform integer in [lo, hi]; with `align`, rounded to a multiple of it half of the time."""
    v = int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))
    if align and rng.random() < 0.5:
        v = max(align, int(round(v / align)) * align)
    return max(lo, min(hi, v))


def loss_of(y):
    return jnp.mean(jnp.square(y.astype(jnp.float32)))


def with_mode(mode, fwd, nparams):
    """fwd(*params, *inputs); fwdbwd = value_and_grad of the mean-square loss w.r.t. the first `nparams` args."""
    if mode == "fwd":
        return fwd

    def fb(*args):
        p, rest = args[:nparams], args[nparams:]
        return jax.value_and_grad(lambda p: loss_of(fwd(*p, *rest)))(p)
    return fb


# ---- families: draw(rng) -> params; build(params) -> (f, [(shape, dtype)], donate_argnums)

def mlp_draw(rng):
    depth = rng.randint(1, 4)
    widths = [logint(rng, 16, 8192, 128) for _ in range(depth + 1)]
    return {"batch": logint(rng, 1, 65536, 128), "widths": widths, "act": rng.choice(["relu", "gelu"]),
            "mode": rng.choice(["fwd", "fwdbwd"]), "dtype": rng.choice(["bf16", "bf16", "f32"])}


def mlp_build(p):
    dt, w = DT[p["dtype"]], p["widths"]
    act = jax.nn.relu if p["act"] == "relu" else jax.nn.gelu
    n = len(w) - 1

    def fwd(*args):
        ws, bs, x = args[:n], args[n:2 * n], args[2 * n]
        for i in range(n):
            x = x @ ws[i] + bs[i]
            if i < n - 1:
                x = act(x)
        return x
    specs = [((w[i], w[i + 1]), dt) for i in range(n)] + [((w[i + 1],), dt) for i in range(n)]
    specs.append(((p["batch"], w[0]), dt))
    return with_mode(p["mode"], fwd, 2 * n), specs, ()


def decode_matmul_draw(rng):
    return {"M": rng.choice([1, 2, 4, 8, 8, 8, 16, 32]), "K": logint(rng, 512, 16384, 128),
            "N": logint(rng, 512, 32768, 128), "dtype": rng.choice(["bf16", "bf16", "f32", "int8", "fp8"])}


def _mm(a, b, dtype):
    if dtype == "int8":
        return jnp.dot(a, b, preferred_element_type=jnp.int32)
    if dtype == "fp8":
        return jnp.dot(a, b, preferred_element_type=jnp.bfloat16)
    return a @ b


def decode_matmul_build(p):
    dt = DT[p["dtype"]]
    return (lambda x, w: _mm(x, w, p["dtype"])), [((p["M"], p["K"]), dt), ((p["K"], p["N"]), dt)], ()


def matvec_draw(rng):
    return {"M": logint(rng, 256, 32768, 128), "K": logint(rng, 256, 16384, 128), "batch": rng.choice([1, 1, 2, 4]),
            "dtype": rng.choice(["bf16", "f32"])}


def matvec_build(p):
    dt = DT[p["dtype"]]
    return (lambda w, v: w @ v), [((p["M"], p["K"]), dt), ((p["K"], p["batch"]), dt)], ()


def attention_draw(rng):
    s = logint(rng, 128, 16384, 128)
    h = rng.choice([1, 2, 4, 8, 12, 16])
    dh = rng.choice([64, 64, 128, 96])
    b = max(1, min(logint(rng, 1, 32), (1 << 31) // (h * s * s * 4)))
    return {"B": b, "S": s, "H": h, "Dh": dh, "causal": rng.random() < 0.6,
            "mode": rng.choice(["fwd", "fwd", "fwdbwd"]), "dtype": rng.choice(["bf16", "bf16", "f32"])}


def _attention(q, k, v, causal):
    s = q.shape[1]
    sc = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / math.sqrt(q.shape[-1])
    if causal:
        mask = jnp.tril(jnp.ones((s, s), bool))
        sc = jnp.where(mask, sc, -1e30)
    pr = jax.nn.softmax(sc, axis=-1).astype(q.dtype)
    return jnp.einsum("bhqk,bkhd->bqhd", pr, v)


def attention_build(p):
    dt = DT[p["dtype"]]
    shp = (p["B"], p["S"], p["H"], p["Dh"])
    f = with_mode(p["mode"], lambda q, k, v: _attention(q, k, v, p["causal"]), 3)
    return f, [(shp, dt)] * 3, ()


def _layernorm(x, g, b):
    x32 = x.astype(jnp.float32)
    mu = jnp.mean(x32, -1, keepdims=True)
    var = jnp.mean(jnp.square(x32 - mu), -1, keepdims=True)
    return ((x32 - mu) * lax.rsqrt(var + 1e-5) * g + b).astype(x.dtype)


def transformer_draw(rng):
    s = logint(rng, 128, 8192, 128)
    h = rng.choice([4, 8, 12, 16])
    d = h * rng.choice([64, 64, 128])
    b = max(1, min(logint(rng, 1, 16), (1 << 30) // (h * s * s * 4)))
    return {"B": b, "S": s, "D": d, "H": h, "causal": rng.random() < 0.7,
            "mode": rng.choice(["fwd", "fwd", "fwdbwd"]), "dtype": rng.choice(["bf16", "bf16", "f32"])}


def transformer_build(p):
    dt, d, h = DT[p["dtype"]], p["D"], p["H"]

    def fwd(wqkv, wo, w1, w2, g1, b1, g2, b2, x):
        bsz, s, _ = x.shape
        y = _layernorm(x, g1, b1)
        qkv = (y @ wqkv).reshape(bsz, s, 3, h, d // h)
        a = _attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], p["causal"]).reshape(bsz, s, d)
        x = x + a @ wo
        y = _layernorm(x, g2, b2)
        return x + jax.nn.gelu(y @ w1) @ w2
    specs = [((d, 3 * d), dt), ((d, d), dt), ((d, 4 * d), dt), ((4 * d, d), dt)] + [((d,), jnp.float32)] * 4
    specs.append(((p["B"], p["S"], d), dt))
    return with_mode(p["mode"], fwd, 8), specs, ()


def conv_draw(rng):
    k = rng.choice([1, 3, 3, 7])
    hw = rng.choice([7, 14, 28, 56, 112, 224, 17, 33, 65]) if k != 7 else rng.choice([56, 112, 224, 65])
    c = logint(rng, 3 if k == 7 else 16, 1024, 64)
    depthwise = k == 3 and rng.random() < 0.3
    return {"N": logint(rng, 1, 64), "HW": hw, "Cin": c, "Cout": c if depthwise else logint(rng, 16, 1024, 64),
            "k": k, "stride": rng.choice([1, 2]), "depthwise": depthwise,
            "bn": rng.choice(["none", "inference", "training"]), "mode": rng.choice(["fwd", "fwd", "fwdbwd"]),
            "dtype": rng.choice(["bf16", "bf16", "f32"])}


def _conv(x, w, stride, groups=1):
    return lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                    feature_group_count=groups)


def _bn(y, g, b, mode):
    if mode == "none":
        return y
    if mode == "inference":
        return y * g + b
    y32 = y.astype(jnp.float32)
    mu = jnp.mean(y32, (0, 1, 2))
    var = jnp.var(y32, (0, 1, 2))
    return ((y32 - mu) * lax.rsqrt(var + 1e-5) * g + b).astype(y.dtype)


def conv_build(p):
    dt = DT[p["dtype"]]
    groups = p["Cin"] if p["depthwise"] else 1
    wshape = (p["k"], p["k"], 1 if p["depthwise"] else p["Cin"], p["Cout"])

    def fwd(w, g, b, x):
        return jax.nn.relu(_bn(_conv(x, w, p["stride"], groups), g, b, p["bn"]))
    specs = [(wshape, dt), ((p["Cout"],), dt), ((p["Cout"],), dt), ((p["N"], p["HW"], p["HW"], p["Cin"]), dt)]
    return with_mode(p["mode"], fwd, 3), specs, ()


def resnet_draw(rng):
    c = rng.choice([64, 128, 256, 512, 96, 200])
    stride = rng.choice([1, 2])
    return {"N": logint(rng, 1, 64), "HW": rng.choice([7, 14, 28, 56, 19]), "C": c * 4 if stride == 1 else c * 2,
            "mid": c, "stride": stride, "bn": rng.choice(["inference", "training"]),
            "mode": rng.choice(["fwd", "fwd", "fwdbwd"]), "dtype": rng.choice(["bf16", "bf16", "f32"])}


def resnet_build(p):
    dt, c, m, s = DT[p["dtype"]], p["C"], p["mid"], p["stride"]
    cout = 4 * m

    def fwd(w1, w2, w3, wp, g1, b1, g2, b2, g3, b3, x):
        y = jax.nn.relu(_bn(_conv(x, w1, 1), g1, b1, p["bn"]))
        y = jax.nn.relu(_bn(_conv(y, w2, s), g2, b2, p["bn"]))
        y = _bn(_conv(y, w3, 1), g3, b3, p["bn"])
        sc = _conv(x, wp, s) if (s != 1 or c != cout) else x
        return jax.nn.relu(y + sc)
    specs = [((1, 1, c, m), dt), ((3, 3, m, m), dt), ((1, 1, m, cout), dt), ((1, 1, c, cout), dt),
             ((m,), dt), ((m,), dt), ((m,), dt), ((m,), dt), ((cout,), dt), ((cout,), dt),
             ((p["N"], p["HW"], p["HW"], c), dt)]
    return with_mode(p["mode"], fwd, 10), specs, ()


def dcn_draw(rng):
    return {"batch": logint(rng, 32, 65536, 128), "D": logint(rng, 64, 4096, 128), "layers": rng.randint(1, 4),
            "mode": rng.choice(["fwd", "fwdbwd"]), "dtype": rng.choice(["bf16", "f32"])}


def dcn_build(p):
    dt, d, n = DT[p["dtype"]], p["D"], p["layers"]

    def fwd(*args):
        ws, bs, x0 = args[:n], args[n:2 * n], args[2 * n]
        x = x0
        for i in range(n):
            x = x0 * (x @ ws[i] + bs[i]) + x
        return x
    specs = [((d, d), dt)] * n + [((d,), dt)] * n + [((p["batch"], d), dt)]
    return with_mode(p["mode"], fwd, 2 * n), specs, ()


def embedding_draw(rng):
    return {"vocab": logint(rng, 1000, 1000000), "dim": rng.choice([16, 32, 64, 100, 128, 256]),
            "batch": logint(rng, 64, 16384, 128), "bag": rng.choice([1, 1, 4, 20, 50]),
            "mode": rng.choice(["fwd", "fwdbwd"]), "dtype": rng.choice(["f32", "bf16"])}


def embedding_build(p):
    dt = DT[p["dtype"]]

    def fwd(table, ids):
        return jnp.take(table, ids, axis=0).sum(axis=1)
    specs = [((p["vocab"], p["dim"]), dt), ((p["batch"], p["bag"]), jnp.int32)]
    return with_mode(p["mode"], fwd, 1), specs, ()


def norm_draw(rng):
    return {"N": logint(rng, 8, 65536, 128), "D": logint(rng, 64, 16384, 128), "kind": rng.choice(["layernorm",
            "rmsnorm"]), "mode": rng.choice(["fwd", "fwdbwd"]), "dtype": rng.choice(["bf16", "f32"])}


def norm_build(p):
    dt = DT[p["dtype"]]

    def fwd(g, b, x, r):
        x = x + r
        if p["kind"] == "layernorm":
            return _layernorm(x, g, b)
        x32 = x.astype(jnp.float32)
        return (x32 * lax.rsqrt(jnp.mean(jnp.square(x32), -1, keepdims=True) + 1e-6) * g).astype(dt)
    specs = [((p["D"],), jnp.float32), ((p["D"],), jnp.float32), ((p["N"], p["D"]), dt), ((p["N"], p["D"]), dt)]
    return with_mode(p["mode"], fwd, 2 if p["mode"] == "fwdbwd" else 0), specs, ()


def xent_draw(rng):
    return {"N": logint(rng, 64, 16384, 128), "vocab": logint(rng, 1000, 262144, 128),
            "hidden": rng.choice([0, 0, 256, 512, 1024]), "mode": rng.choice(["fwd", "fwdbwd"]),
            "dtype": rng.choice(["bf16", "f32"])}


def xent_build(p):
    dt = DT[p["dtype"]]

    def loss(logits, labels):
        lg = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
        return -jnp.mean(jnp.take_along_axis(lg, labels[:, None], axis=-1))
    if p["hidden"]:
        def f(w, h, labels):
            return loss(h @ w, labels)
        specs = [((p["hidden"], p["vocab"]), dt), ((p["N"], p["hidden"]), dt), ((p["N"],), jnp.int32)]
        g = jax.value_and_grad(f) if p["mode"] == "fwdbwd" else f
    else:
        specs = [((p["N"], p["vocab"]), dt), ((p["N"],), jnp.int32)]
        g = jax.value_and_grad(loss) if p["mode"] == "fwdbwd" else loss
    return g, specs, ()


def moe_draw(rng):
    return {"tokens": logint(rng, 64, 16384, 128), "D": rng.choice([256, 512, 768, 1024]),
            "experts": rng.choice([4, 8, 16, 32, 64]), "F": rng.choice([256, 512, 1024, 2048]),
            "capacity_factor": rng.choice([1.0, 1.25, 2.0]), "mode": rng.choice(["fwd", "fwdbwd"]),
            "dtype": rng.choice(["bf16", "f32"])}


def moe_build(p):
    dt, e = DT[p["dtype"]], p["experts"]
    cap = max(1, int(p["capacity_factor"] * p["tokens"] / e))

    def fwd(wg, w1, w2, x):
        probs = jax.nn.softmax((x @ wg).astype(jnp.float32), -1)
        idx = jnp.argmax(probs, -1)
        mask = jax.nn.one_hot(idx, e, dtype=jnp.int32)
        pos = jnp.cumsum(mask, 0) * mask
        keep = (pos > 0) & (pos <= cap)
        disp = (jax.nn.one_hot(pos - 1, cap, dtype=dt) * keep[..., None].astype(dt))
        xin = jnp.einsum("tec,td->ecd", disp, x)
        h = jax.nn.gelu(jnp.einsum("ecd,edf->ecf", xin, w1))
        out = jnp.einsum("ecf,efd->ecd", h, w2)
        gate = jnp.max(probs, -1).astype(dt)
        return jnp.einsum("tec,ecd->td", disp, out) * gate[:, None]
    specs = [((p["D"], e), dt), ((e, p["D"], p["F"]), dt), ((e, p["F"], p["D"]), dt), ((p["tokens"], p["D"]), dt)]
    return with_mode(p["mode"], fwd, 3), specs, ()


def scan_draw(rng):
    return {"steps": logint(rng, 4, 256), "batch": logint(rng, 1, 4096, 128), "hidden": logint(rng, 64, 2048, 128),
            "kind": rng.choice(["rnn", "rnn", "fori_axpy"]), "mode": rng.choice(["fwd", "fwdbwd"]),
            "dtype": rng.choice(["bf16", "f32"])}


def scan_build(p):
    dt, t, b, h = DT[p["dtype"]], p["steps"], p["batch"], p["hidden"]
    if p["kind"] == "rnn":
        def fwd(w, u, xs, h0):
            def cell(hc, x):
                hn = jnp.tanh(hc @ w + x @ u)
                return hn, hn
            hT, ys = lax.scan(cell, h0, xs)
            return ys
        specs = [((h, h), dt), ((h, h), dt), ((t, b, h), dt), ((b, h), dt)]
        return with_mode(p["mode"], fwd, 2), specs, ()

    def fwd(a, x, y):
        return lax.fori_loop(0, t, lambda i, yc: a * jnp.tanh(yc) + x, y)
    specs = [((b, h), dt), ((b, h), dt), ((b, h), dt)]
    return with_mode(p["mode"], fwd, 1), specs, ()


def optimizer_draw(rng):
    n = rng.randint(1, 6)
    return {"kind": rng.choice(["sgd", "momentum", "adam", "adagrad"]),
            "shapes": [[logint(rng, 8, 16384, 128), logint(rng, 1, 8192, 128)] for _ in range(n)],
            "donate": rng.random() < 0.5, "mode": "update", "dtype": "f32"}


def optimizer_build(p):
    shapes = [tuple(s) for s in p["shapes"]]
    n, kind = len(shapes), p["kind"]
    nstate = {"sgd": 0, "momentum": 1, "adagrad": 1, "adam": 2}[kind]

    def f(*args):
        ps, gs = args[:n], args[n:2 * n]
        st = [args[2 * n + j * n: 2 * n + (j + 1) * n] for j in range(nstate)]
        if kind == "sgd":
            return tuple(pp - 0.01 * g for pp, g in zip(ps, gs))
        if kind == "momentum":
            m = tuple(0.9 * mm + g for mm, g in zip(st[0], gs))
            return tuple(pp - 0.01 * mm for pp, mm in zip(ps, m)), m
        if kind == "adagrad":
            a = tuple(aa + g * g for aa, g in zip(st[0], gs))
            return tuple(pp - 0.01 * g * lax.rsqrt(aa + 1e-7) for pp, g, aa in zip(ps, gs, a)), a
        m = tuple(0.9 * mm + 0.1 * g for mm, g in zip(st[0], gs))
        v = tuple(0.999 * vv + 0.001 * g * g for vv, g in zip(st[1], gs))
        return tuple(pp - 0.001 * mm / (jnp.sqrt(vv) + 1e-8) for pp, mm, vv in zip(ps, m, v)), m, v
    specs = [(s, jnp.float32) for s in shapes] * (2 + nstate)
    donate = tuple([i for i in range(n)] + [2 * n + i for i in range(nstate * n)]) if p["donate"] else ()
    return f, specs, donate


ELEM_OPS = ["add", "mul", "exp", "tanh", "max", "sigmoid", "sub", "rsqrt"]


def elementwise_draw(rng):
    return {"shape": [logint(rng, 1, 65536, 128), logint(rng, 1, 8192, 128)],
            "ops": [rng.choice(ELEM_OPS) for _ in range(rng.randint(1, 8))], "dtype": rng.choice(["bf16", "f32"])}


def elementwise_build(p):
    dt = DT[p["dtype"]]

    def f(x, y):
        for op in p["ops"]:
            x = {"add": lambda: x + y, "mul": lambda: x * y, "exp": lambda: jnp.exp(x), "tanh": lambda: jnp.tanh(x),
                 "max": lambda: jnp.maximum(x, y), "sigmoid": lambda: jax.nn.sigmoid(x), "sub": lambda: x - y,
                 "rsqrt": lambda: lax.rsqrt(jnp.abs(x) + 1)}[op]()
        return x
    return f, [(tuple(p["shape"]), dt)] * 2, ()


def reduction_draw(rng):
    rank = rng.choice([2, 2, 3])
    shape = [logint(rng, 1, 16384, 128) for _ in range(rank)]
    return {"shape": shape, "kind": rng.choice(["sum", "max", "mean_sq"]),
            "axes": sorted(rng.sample(range(rank), rng.randint(1, rank))), "dtype": rng.choice(["bf16", "f32"])}


def reduction_build(p):
    dt, ax = DT[p["dtype"]], tuple(p["axes"])

    def f(x):
        if p["kind"] == "sum":
            return jnp.sum(x, ax)
        if p["kind"] == "max":
            return jnp.max(x, ax)
        return jnp.mean(jnp.square(x.astype(jnp.float32)), ax)
    return f, [(tuple(p["shape"]), dt)], ()


FAMILIES = {
    "mlp": (mlp_draw, mlp_build, 36),
    "decode_matmul": (decode_matmul_draw, decode_matmul_build, 30),
    "matvec": (matvec_draw, matvec_build, 20),
    "attention": (attention_draw, attention_build, 36),
    "transformer_block": (transformer_draw, transformer_build, 36),
    "conv": (conv_draw, conv_build, 36),
    "resnet_block": (resnet_draw, resnet_build, 30),
    "dcn_cross": (dcn_draw, dcn_build, 24),
    "embedding": (embedding_draw, embedding_build, 20),
    "norm": (norm_draw, norm_build, 24),
    "softmax_xent": (xent_draw, xent_build, 24),
    "moe_routing": (moe_draw, moe_build, 20),
    "scan": (scan_draw, scan_build, 20),
    "optimizer": (optimizer_draw, optimizer_build, 24),
    "elementwise": (elementwise_draw, elementwise_build, 24),
    "reduction": (reduction_draw, reduction_build, 24),
}


# ---- TensorCore op records (reference ops.jsonl schema): the shapes the op sample lacks.
OP_DT = {"bfloat16": jnp.bfloat16, "float32": jnp.float32, "int8": jnp.int8, "float8_e4m3fn": jnp.float8_e4m3fn}


def op_matmul_draw(rng):
    kind = rng.choice(["decode", "decode", "matvec", "skinny"])
    k, n = logint(rng, 256, 16384, 128), logint(rng, 256, 32768, 128)
    if kind == "decode":
        m = rng.choice([1, 2, 4, 8, 8, 16, 32])
    elif kind == "matvec":
        m, n = logint(rng, 256, 32768, 128), 1
    else:
        m, n = logint(rng, 256, 16384, 128), rng.choice([2, 4, 8, 16, 32])
    return {"M": m, "K": k, "N": n, "dtype": rng.choice(["bfloat16", "bfloat16", "float32", "int8", "float8_e4m3fn"])}


def op_matmul_build(p):
    dt = OP_DT[p["dtype"]]
    pref = {"int8": jnp.int32, "float8_e4m3fn": jnp.bfloat16}.get(p["dtype"])
    return (lambda a, b: jnp.dot(a, b, preferred_element_type=pref)), [((p["M"], p["K"]), dt), ((p["K"], p["N"]), dt)]


def op_conv_draw(rng):
    k = rng.choice([1, 3, 3, 5, 7])
    c = logint(rng, 3 if k == 7 else 16, 512, 64)
    return {"input": [logint(rng, 1, 32), rng.choice([14, 28, 56, 112, 224, 33]),
                      0, c], "kernel_hwio": [k, k, c, logint(rng, 16, 512, 64)], "stride": rng.choice([2, 2, 1]),
            "padding": rng.choice(["SAME", "SAME", "VALID"]), "dtype": rng.choice(["bfloat16", "bfloat16", "float32"])}


def op_conv_build(p):
    dt = OP_DT[p["dtype"]]
    n, hw, _, c = p["input"]
    s = p["stride"]

    def f(x, w):
        return lax.conv_general_dilated(x, w, (s, s), p["padding"], dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return f, [((n, hw, hw, c), dt), (tuple(p["kernel_hwio"]), dt)]


def op_mlp_draw(rng):
    return {"B": rng.choice([1, 2, 4, 8, 16, 32, 64]), "Din": logint(rng, 256, 16384, 128),
            "Dout": logint(rng, 256, 16384, 128), "dtype": rng.choice(["bfloat16", "float32"])}


def op_mlp_build(p):
    dt = OP_DT[p["dtype"]]
    return (lambda x, w, b: jax.nn.relu(x @ w + b)), [((p["B"], p["Din"]), dt), ((p["Din"], p["Dout"]), dt),
                                                       ((p["Dout"],), dt)]


def _fix_conv(p):
    p["input"][2] = p["input"][1]  # square images
    return p


OP_FAMILIES = {
    "matmul": (op_matmul_draw, op_matmul_build, 60),
    "conv2d_nhwc": (lambda rng: _fix_conv(op_conv_draw(rng)), op_conv_build, 40),
    "mlp_layer": (op_mlp_draw, op_mlp_build, 24),
}
