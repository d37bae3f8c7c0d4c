"""Reads the XLA TPU compiler's optimized HLO text into the corpus record fields: per-instruction estimates of the
ENTRY computation, the total the reference defines (entry sum + trip count x body sum for each compiler `while`),
and the work that carries no estimate (`estimate_gaps`). Analysis only; never run by tests or CI."""
import json
import re

INT64_MAX = 9223372036854775807
# Instructions that are bookkeeping or overlapped DMA, never real work the TensorCore total leaves out.
NO_WORK = {"parameter", "constant", "bitcast", "get-tuple-element", "tuple", "copy-start", "copy-done",
           "slice-start", "slice-done", "async-update", "async-done", "after-all", "opt-barrier",
           "partition-id", "replica-id", "reshape", "while", "conditional", "call"}
BOOKKEEPING_CUSTOM = ("ConcatBitcast", "AllocateBuffer", "NopReturnToken")
COMP_RE = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")


def _split_shape(rest):
    """rest = 'SHAPE opcode(...)...': returns (shape, remainder starting at opcode)."""
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                return rest[: i + 1], rest[i + 1:].lstrip()
    i = rest.index(" ")
    # a shape never holds a space outside its layout braces
    brace = 0
    for j, ch in enumerate(rest):
        brace += ch == "{"
        brace -= ch == "}"
        if ch == " " and brace == 0:
            i = j
            break
    return rest[:i], rest[i + 1:].lstrip()


def parse_module(text):
    """Returns (computations: name -> list of instruction dicts, entry name)."""
    comps, entry, cur = {}, None, None
    for line in text.splitlines():
        if cur is None:
            m = COMP_RE.match(line)
            if m:
                cur = m.group(2)
                comps[cur] = []
                if m.group(1):
                    entry = cur
            continue
        if line.startswith("}"):
            cur = None
            continue
        s = line.strip()
        if not s.startswith("%") and not s.startswith("ROOT "):
            continue
        root = s.startswith("ROOT ")
        if root:
            s = s[5:]
        name, rest = s.split(" = ", 1)
        shape, rest = _split_shape(rest)
        opcode = rest[: rest.index("(")]
        ins = {"name": name.lstrip("%"), "opcode": opcode, "shape": shape, "root": root}
        m = re.search(r"kind=(k\w+)", rest)
        if m:
            ins["fusion_kind"] = m.group(1)
        m = re.search(r"calls=%?([\w.\-]+)", rest)
        if m:
            ins["calls"] = m.group(1)
        m = re.search(r"body=%?([\w.\-]+)", rest)
        if m:
            ins["body"] = m.group(1)
        m = re.search(r"condition=%?([\w.\-]+)", rest)
        if m:
            ins["condition"] = m.group(1)
        m = re.search(r'custom_call_target="([^"]+)"', rest)
        if m:
            ins["custom_call_target"] = m.group(1)
        m = re.search(r'"known_trip_count":\{"n":"(\d+)"', rest)
        if m:
            ins["known_trip_count"] = int(m.group(1))
        m = re.search(r'"estimated_cycles":"(\d+)"', rest)
        if m:
            ins["estimated_cycles"] = int(m.group(1))
            m2 = re.search(r'"cost_model_type":"COST_MODEL_TYPE_(\w+)"', rest)
            ins["cost_model_type"] = m2.group(1) if m2 else None
            m3 = re.search(r'"iteration_bounds":\[([^\]]*)\]', rest)
            ins["iteration_bounds"] = json.loads("[" + m3.group(1) + "]") if m3 else None
        if "megacore" in rest:
            ins["megacore"] = True
        m = re.search(r"constant\((-?\d+)\)", rest)
        if opcode == "constant" and m:
            ins["value"] = int(m.group(1))
        comps[cur].append(ins)
    return comps, entry


def _trip_count(w, comps):
    if "known_trip_count" in w:
        return w["known_trip_count"]
    cond = comps.get(w.get("condition"), [])
    consts = [i["value"] for i in cond if "value" in i]
    return max(consts) if consts else None


def _sum(comp, comps, loops, depth=0):
    total = 0
    for i in comps[comp]:
        e = i.get("estimated_cycles")
        if e is not None and e != INT64_MAX:
            total += e
        if i["opcode"] == "while" and depth < 8:
            trips = _trip_count(i, comps)
            body = _sum(i["body"], comps, loops, depth + 1)
            loops.append({"name": i["name"], "trip_count": trips, "body_estimated_cycles": body,
                          "body_instructions": len(comps[i["body"]])})
            total += (trips or 0) * body
    return total


def _shape_bytes(shape):
    bits = {"pred": 8, "s8": 8, "u8": 8, "f8e4m3fn": 8, "f8e5m2": 8, "s4": 4, "bf16": 16, "f16": 16, "s16": 16,
            "s32": 32, "u32": 32, "f32": 32, "s64": 64, "f64": 64}
    n = 0
    for m in re.finditer(r"(\w+)\[([\d,]*)\]", shape):
        cnt = 1
        for d in (m.group(2).split(",") if m.group(2) else []):
            cnt *= int(d)
        n += cnt * bits.get(m.group(1), 32) // 8
    return n


def summarize(text):
    """The record fields read off one optimized module."""
    comps, entry = parse_module(text)
    loops = []
    total = _sum(entry, comps, loops)
    instrs, gaps, gaps_minor, sc = [], {}, {}, []
    for i in comps[entry]:
        called = sorted({c["opcode"] for c in comps.get(i.get("calls"), [])}) if "calls" in i else None
        row = {k: i[k] for k in ("name", "opcode", "fusion_kind", "shape", "estimated_cycles", "cost_model_type",
                                 "iteration_bounds", "custom_call_target", "megacore") if k in i}
        if called is not None:
            row["called_opcodes"] = called
        instrs.append(row)
        cls = None
        if i.get("estimated_cycles") == INT64_MAX:
            cls = "estimate_int64_max:" + i["opcode"] + (":" + i["fusion_kind"] if "fusion_kind" in i else "")
        elif "estimated_cycles" not in i and i["opcode"] not in NO_WORK:
            if i["opcode"] == "async-start":
                inner = comps.get(i.get("calls"), [])
                if any("custom_call_target" in c or c["opcode"] == "custom-call" for c in inner) and \
                        "offload" in i["name"]:
                    cls = "sparsecore_offload:embedding"
                    sc.append(i["name"])
            elif i["opcode"] == "custom-call" and i.get("custom_call_target", "").startswith(BOOKKEEPING_CUSTOM):
                cls = None
            elif i["opcode"] == "fusion":
                cls = "fusion:" + i.get("fusion_kind", "?")
                if called and "gather" in called:
                    cls += ":custom-call+gather"
            else:
                cls = i["opcode"]
        if cls and re.match(r"^\w+\[\]", i["shape"]):
            cls = None  # a scalar op is no work worth an estimate
        if cls:
            shape = i["shape"]
            if i["opcode"] == "async-start":  # the result is the matching async-done's shape
                done = [c for c in comps[entry] if c["name"] == i["name"].replace("start", "done")]
                shape = done[0]["shape"] if done else shape
            target = gaps_minor if _shape_bytes(shape) < 65536 else gaps
            target[cls] = target.get(cls, 0) + 1
    entry_sum = sum(i.get("estimated_cycles", 0) for i in comps[entry] if i.get("estimated_cycles") != INT64_MAX)
    return {
        "instructions": instrs,
        "entry_estimated_cycles": entry_sum,
        "total_estimated_cycles": total,
        "loops": loops,
        "estimate_gaps": gaps,
        "estimate_gaps_minor": gaps_minor,
        "estimate_complete": not gaps,
        "sparsecore_offloads": sc,
    }
