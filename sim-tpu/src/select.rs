//! Kernel selection (formats and precisions): an operator information table per op and chip, and a
//! chooser for a chain of ops that keeps each op in the user's dtype and data format where a kernel
//! supports it, otherwise picks a supported kernel and inserts casts and format conversions, choosing
//! among supported kernels by dynamic programming so that the conversions between adjacent ops cost
//! the least (costs from the TensorCore model, on real padded layouts). An op whose requested format is
//! supported still moves to a neighbour's format when that removes conversions (ties keep the request);
//! precision is changed only where the requested one has no kernel.
//!
//! Formats: NCHW, NHWC, and the blocked nChw8c, which is the tiled layout `{3,2,1,0:T(8,1,1)}` of the
//! logical [N,C,H,W] array (channels split into blocks of 8, innermost).

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::tensorcore::{cost, ChipModel, OpError, OpSpec};

/// A tensor data format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Format {
    /// Batch, channels, height, width.
    #[serde(rename = "NCHW")]
    Nchw,
    /// Batch, height, width, channels (what the TPU convolution emitter consumes).
    #[serde(rename = "NHWC")]
    Nhwc,
    /// Channels blocked by 8: the tiled layout {3,2,1,0:T(8,1,1)} of [N,C,H,W].
    #[serde(rename = "nChw8c")]
    NChw8c,
}

impl Format {
    /// The XLA layout of a logical [N,C,H,W] array in this format.
    pub fn xla_layout(self) -> &'static str {
        match self {
            Format::Nchw => "{3,2,1,0}",
            Format::Nhwc => "{1,3,2,0}",
            Format::NChw8c => "{3,2,1,0:T(8,1,1)}",
        }
    }
}

impl std::fmt::Display for Format {
    /// The name users write in a graph file (and serde uses): NCHW, NHWC, nChw8c.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Format::Nchw => "NCHW",
            Format::Nhwc => "NHWC",
            Format::NChw8c => "nChw8c",
        })
    }
}

/// One op of the user's graph (a chain; each op consumes the previous op's output).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphOp {
    /// conv2d, relu, add (elementwise ops take one tensor).
    pub op: String,
    /// The user's dtype (float32, bfloat16, int8, float8_e4m3fn).
    pub dtype: String,
    /// The user's format.
    pub format: Format,
    /// conv2d: kernel [KH, KW, Cin, Cout].
    #[serde(default)]
    pub kernel: Option<Vec<i64>>,
    /// conv2d stride (default 1).
    #[serde(default)]
    pub stride: Option<i64>,
    /// conv2d padding, SAME or VALID (default SAME).
    #[serde(default)]
    pub padding: Option<String>,
}

/// The graph: input tensor (logical [N,C,H,W]) and the chain of ops.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Graph {
    /// Logical input dims [N, C, H, W].
    pub input: Vec<i64>,
    /// Ops in order.
    pub ops: Vec<GraphOp>,
}

/// What a kernel of an op supports on a chip.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpInfo {
    /// Op name.
    pub op: &'static str,
    /// Supported dtypes.
    pub dtypes: Vec<&'static str>,
    /// Supported formats.
    pub formats: Vec<Format>,
}

/// The operator information table of a chip. Convolutions run NHWC (the layout the compiler's
/// convolution emitter takes; NCHW programs get transposes, as the calibration records show); int8
/// MXU work where the compiler's estimates show int8 at twice bf16 (v5e, v5p, v6e), fp8 only on tpu7x.
pub fn op_info(op: &str, chip: &str) -> Option<OpInfo> {
    let mut mxu = vec!["bfloat16", "float32"];
    match chip {
        "v5e" | "v5p" | "v6e" => mxu.push("int8"),
        "tpu7x" => mxu.push("float8_e4m3fn"),
        _ => {}
    }
    match op {
        "conv2d" => Some(OpInfo {
            op: "conv2d",
            dtypes: mxu,
            formats: vec![Format::Nhwc],
        }),
        "relu" | "add" => Some(OpInfo {
            op: if op == "relu" { "relu" } else { "add" },
            dtypes: vec!["bfloat16", "float32"],
            formats: vec![Format::Nchw, Format::Nhwc, Format::NChw8c],
        }),
        _ => None,
    }
}

/// A conversion the chooser inserted.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Conversion {
    /// Inserted before op `before` (== number of ops: after the last op, back to the user's format).
    pub before: usize,
    /// "cast" or "format".
    pub kind: String,
    /// From (dtype or format).
    pub from: String,
    /// To.
    pub to: String,
    /// TensorCore cycles of the conversion.
    pub cycles: u64,
}

/// The chosen kernel of an op.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Choice {
    /// Op.
    pub op: String,
    /// Kernel dtype.
    pub dtype: String,
    /// Kernel format.
    pub format: Format,
    /// Whether it is what the user asked for.
    pub as_requested: bool,
    /// Cycles of the op itself (TensorCore model; 0 for elementwise ops fused into neighbours).
    pub cycles: u64,
}

/// The selection.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Selection {
    /// Per op.
    pub kernels: Vec<Choice>,
    /// Inserted conversions.
    pub conversions: Vec<Conversion>,
    /// Sum of conversion cycles.
    pub conversion_cycles: u64,
}

/// Errors of kernel selection.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    /// The graph is malformed.
    #[error("graph: {0}")]
    Graph(String),
    /// The cost model rejected an op.
    #[error(transparent)]
    Op(#[from] OpError),
}

fn nchw_to(format: Format, s: &[i64]) -> Vec<i64> {
    match format {
        Format::Nhwc => vec![s[0], s[2], s[3], s[1]],
        _ => s.to_vec(),
    }
}

fn conversion_cycles(
    shape: &[i64],
    from: (&str, Format),
    to: (&str, Format),
    chip: &ChipModel,
) -> Result<Vec<Conversion>, SelectError> {
    let mut out = Vec::new();
    if from.1 != to.1 {
        // A relayout between formats is a transpose on the TensorCore (blocked formats included: the
        // same data movement between tiled layouts).
        let (op, s) = if to.1 == Format::Nhwc {
            ("transpose_nchw_to_nhwc", shape.to_vec())
        } else {
            ("transpose_nhwc_to_nchw", nchw_to(Format::Nhwc, shape))
        };
        let c = cost(
            &OpSpec::from_value(&json!({"op": op, "params": {"shape": s, "dtype": from.0}}))?,
            chip,
        )?;
        out.push(Conversion {
            before: 0,
            kind: "format".into(),
            from: from.1.to_string(),
            to: to.1.to_string(),
            cycles: c.cycles,
        });
    }
    if from.0 != to.0 {
        let c = cost(
            &OpSpec::from_value(
                &json!({"op": "convert", "params": {"shape": nchw_to(to.1, shape), "dtype": from.0, "to": to.0}}),
            )?,
            chip,
        )?;
        out.push(Conversion {
            before: 0,
            kind: "cast".into(),
            from: from.0.into(),
            to: to.0.into(),
            cycles: c.cycles,
        });
    }
    Ok(out)
}

/// The logical NCHW shape after op `i` (a convolution's output; other ops keep their input's shape).
fn output_shape(i: usize, op: &GraphOp, s: Vec<i64>) -> Result<Vec<i64>, SelectError> {
    if op.op != "conv2d" {
        return Ok(s);
    }
    let k = op
        .kernel
        .clone()
        .ok_or_else(|| SelectError::Graph(format!("ops[{i}].kernel: missing")))?;
    if k.len() != 4 || k.iter().any(|&d| d <= 0) || k[2] != s[1] {
        return Err(SelectError::Graph(format!(
            "ops[{i}].kernel: must be [KH, KW, Cin={}, Cout] with positive dims",
            s[1]
        )));
    }
    let stride = op.stride.unwrap_or(1);
    if stride < 1 {
        return Err(SelectError::Graph(format!(
            "ops[{i}].stride: must be at least 1, got {stride}"
        )));
    }
    let (h, w) = match op.padding.as_deref().unwrap_or("SAME") {
        "VALID" if k[0] > s[2] || k[1] > s[3] => {
            return Err(SelectError::Graph(format!(
                "ops[{i}].kernel: {}x{} window is larger than the {}x{} input with VALID padding",
                k[0], k[1], s[2], s[3]
            )))
        }
        "VALID" => ((s[2] - k[0]) / stride + 1, (s[3] - k[1]) / stride + 1),
        "SAME" => ((s[2] + stride - 1) / stride, (s[3] + stride - 1) / stride),
        other => {
            return Err(SelectError::Graph(format!(
                "ops[{i}].padding: must be SAME or VALID, got '{other}'"
            )))
        }
    };
    Ok(vec![s[0], k[3], h.max(1), w.max(1)])
}

/// Chooses kernels for a chain of ops on a chip (`chip_name` as in the presets).
pub fn select(graph: &Graph, chip: &ChipModel, chip_name: &str) -> Result<Selection, SelectError> {
    if graph.input.len() != 4 || graph.input.iter().any(|&d| d <= 0) {
        return Err(SelectError::Graph(
            "input must be [N, C, H, W] with positive dims".into(),
        ));
    }
    if graph.ops.is_empty() {
        return Err(SelectError::Graph("ops is empty".into()));
    }
    // Shapes (logical NCHW) before each op and the candidate kernels of each op.
    let mut shapes = vec![graph.input.clone()];
    let mut candidates: Vec<Vec<(String, Format)>> = Vec::new();
    for (i, op) in graph.ops.iter().enumerate() {
        let info = op_info(&op.op, chip_name)
            .ok_or_else(|| SelectError::Graph(format!("ops[{i}].op: unknown op '{}' (conv2d, relu, add)", op.op)))?;
        let s = shapes[i].clone();
        let next = output_shape(i, op, s)?;
        shapes.push(next);
        // Every supported kernel is a candidate, the user's own first: ties keep the user's choice,
        // and a supported request is left only when that saves conversions next to it.
        let wanted = (op.dtype.clone(), op.format);
        let mut cands = Vec::new();
        if info.dtypes.contains(&op.dtype.as_str()) && info.formats.contains(&op.format) {
            cands.push(wanted.clone());
        }
        for d in &info.dtypes {
            for f in &info.formats {
                let c = (d.to_string(), *f);
                // Changing precision is never chosen when the user's precision is supported.
                if c != wanted && (*d == op.dtype || !info.dtypes.contains(&op.dtype.as_str())) {
                    cands.push(c);
                }
            }
        }
        candidates.push(cands);
    }
    // Dynamic programming over the chain: best[k][j] = least conversion cycles to run op k with kernel j.
    let first = (graph.ops[0].dtype.clone(), graph.ops[0].format);
    let mut best: Vec<Vec<(u64, usize)>> = Vec::new();
    for (k, cands) in candidates.iter().enumerate() {
        let mut row = Vec::new();
        for c in cands {
            let mut pick = (u64::MAX, 0);
            let prevs: Vec<(String, Format)> = if k == 0 {
                vec![first.clone()]
            } else {
                candidates[k - 1].clone()
            };
            for (pj, p) in prevs.iter().enumerate() {
                let base = if k == 0 { 0 } else { best[k - 1][pj].0 };
                let conv: u64 = conversion_cycles(&shapes[k], (&p.0, p.1), (&c.0, c.1), chip)?
                    .iter()
                    .map(|x| x.cycles)
                    .sum();
                if base.saturating_add(conv) < pick.0 {
                    pick = (base + conv, pj);
                }
            }
            row.push(pick);
        }
        best.push(row);
    }
    // Back to the user's dtype and format after the last op.
    let last = graph.ops.len() - 1;
    let want_out = (graph.ops[last].dtype.clone(), graph.ops[last].format);
    let mut end = (u64::MAX, 0);
    for (j, c) in candidates[last].iter().enumerate() {
        let conv: u64 = conversion_cycles(&shapes[last + 1], (&c.0, c.1), (&want_out.0, want_out.1), chip)?
            .iter()
            .map(|x| x.cycles)
            .sum();
        if best[last][j].0.saturating_add(conv) < end.0 {
            end = (best[last][j].0 + conv, j);
        }
    }
    let mut chosen = vec![0usize; graph.ops.len()];
    chosen[last] = end.1;
    for k in (1..graph.ops.len()).rev() {
        chosen[k - 1] = best[k][chosen[k]].1;
    }
    let mut conversions = Vec::new();
    let mut kernels = Vec::new();
    let mut prev = first;
    for (k, op) in graph.ops.iter().enumerate() {
        let c = candidates[k][chosen[k]].clone();
        for mut x in conversion_cycles(&shapes[k], (&prev.0, prev.1), (&c.0, c.1), chip)? {
            x.before = k;
            conversions.push(x);
        }
        let cycles = if op.op == "conv2d" {
            let s = nchw_to(Format::Nhwc, &shapes[k]);
            let kern = op.kernel.clone().unwrap_or_default();
            let spec = json!({"op": "conv2d_nhwc", "params": {"input": s, "kernel_hwio": kern, "stride": op.stride.unwrap_or(1), "padding": op.padding.clone().unwrap_or_else(|| "SAME".into()), "dtype": c.0}});
            cost(&OpSpec::from_value(&spec)?, chip)?.cycles
        } else {
            0
        };
        kernels.push(Choice {
            op: op.op.clone(),
            dtype: c.0.clone(),
            format: c.1,
            as_requested: c.0 == op.dtype && c.1 == op.format,
            cycles,
        });
        prev = c;
    }
    for mut x in conversion_cycles(&shapes[last + 1], (&prev.0, prev.1), (&want_out.0, want_out.1), chip)? {
        x.before = graph.ops.len();
        conversions.push(x);
    }
    let conversion_cycles = conversions.iter().map(|c| c.cycles).sum();
    Ok(Selection {
        kernels,
        conversions,
        conversion_cycles,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(dtype: &str, format: Format) -> Graph {
        let conv = |c: i64| GraphOp {
            op: "conv2d".into(),
            dtype: dtype.into(),
            format,
            kernel: Some(vec![3, 3, c, 64]),
            stride: Some(1),
            padding: Some("SAME".into()),
        };
        Graph {
            input: vec![8, 64, 56, 56],
            ops: vec![
                conv(64),
                GraphOp {
                    op: "relu".into(),
                    dtype: dtype.into(),
                    format,
                    kernel: None,
                    stride: None,
                    padding: None,
                },
                conv(64),
            ],
        }
    }

    #[test]
    fn nchw_f32_chain_converts_once_each_way() {
        let chip = ChipModel::preset("v5p").unwrap();
        let s = select(&graph("float32", Format::Nchw), &chip, "v5p").unwrap();
        // conv NHWC, relu kept in NHWC (no conversion between), conv NHWC; one transpose in, one out.
        assert_eq!(
            s.kernels.iter().map(|k| k.format).collect::<Vec<_>>(),
            [Format::Nhwc, Format::Nhwc, Format::Nhwc]
        );
        assert_eq!(s.conversions.len(), 2, "{:?}", s.conversions);
        assert_eq!((s.conversions[0].before, s.conversions[1].before), (0, 3));
        assert!(s.conversion_cycles > 0);
    }

    #[test]
    fn formats_print_as_users_write_them() {
        let names: Vec<String> = [Format::Nchw, Format::Nhwc, Format::NChw8c]
            .iter()
            .map(|f| f.to_string())
            .collect();
        assert_eq!(names, ["NCHW", "NHWC", "nChw8c"]);
        let chip = ChipModel::preset("v5p").unwrap();
        let s = select(&graph("float32", Format::Nchw), &chip, "v5p").unwrap();
        assert_eq!(
            (s.conversions[0].from.as_str(), s.conversions[0].to.as_str()),
            ("NCHW", "NHWC")
        );
    }

    #[test]
    fn bad_conv_params_name_the_field() {
        let chip = ChipModel::preset("v5p").unwrap();
        let mut g = graph("float32", Format::Nhwc);
        g.ops[0].stride = Some(0);
        let e = select(&g, &chip, "v5p").unwrap_err().to_string();
        assert_eq!(e, "graph: ops[0].stride: must be at least 1, got 0");
        let mut g = graph("float32", Format::Nhwc);
        g.ops[2].padding = Some("same".into());
        let e = select(&g, &chip, "v5p").unwrap_err().to_string();
        assert_eq!(e, "graph: ops[2].padding: must be SAME or VALID, got 'same'");
        let mut g = graph("float32", Format::Nhwc);
        g.input = vec![8, 64, 2, 2];
        g.ops[0].padding = Some("VALID".into());
        let e = select(&g, &chip, "v5p").unwrap_err().to_string();
        assert_eq!(
            e,
            "graph: ops[0].kernel: 3x3 window is larger than the 2x2 input with VALID padding"
        );
    }

    #[test]
    fn int8_casts_on_v4_but_not_on_v5e() {
        let v4 = select(&graph("int8", Format::Nhwc), &ChipModel::preset("v4").unwrap(), "v4").unwrap();
        assert!(
            v4.conversions.iter().any(|c| c.kind == "cast" && c.from == "int8"),
            "{:?}",
            v4.conversions
        );
        let dtypes = |s: &Selection| s.kernels.iter().map(|k| k.dtype.clone()).collect::<Vec<_>>();
        assert_eq!(dtypes(&v4), ["bfloat16", "bfloat16", "bfloat16"]);
        // v5e's MXU takes int8, the VPU's relu does not: the convs stay int8, the relu is cast around.
        let v5e = select(&graph("int8", Format::Nhwc), &ChipModel::preset("v5e").unwrap(), "v5e").unwrap();
        assert_eq!(dtypes(&v5e), ["int8", "bfloat16", "int8"]);
        let casts: Vec<(usize, &str, &str)> = v5e
            .conversions
            .iter()
            .map(|c| (c.before, c.from.as_str(), c.to.as_str()))
            .collect();
        assert_eq!(casts, [(1, "int8", "bfloat16"), (2, "bfloat16", "int8")]);
    }

    #[test]
    fn supported_requests_need_no_conversion_and_fp8_needs_tpu7x() {
        let chip = ChipModel::preset("v5p").unwrap();
        assert!(select(&graph("bfloat16", Format::Nhwc), &chip, "v5p")
            .unwrap()
            .conversions
            .is_empty());
        let s = select(&graph("float8_e4m3fn", Format::Nhwc), &chip, "v5p").unwrap();
        assert!(s.conversions.iter().any(|c| c.kind == "cast"));
        assert!(op_info("conv2d", "tpu7x").unwrap().dtypes.contains(&"float8_e4m3fn"));
    }
}
