//! Op specifications: exactly the `{"op": ..., "params": {...}}` schema of the compiler calibration records
//! (`reference/tpu-compiler/ops.jsonl`), plus validation that names the offending field.

use serde::{Deserialize, Serialize};

use super::OpError;

/// Element type of an op's operands, spelled as jax spells it in the records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dtype {
    /// bf16.
    Bfloat16,
    /// f16.
    Float16,
    /// f32.
    Float32,
    /// s8 (matmuls accumulate and return s32).
    Int8,
    /// s32.
    Int32,
    /// f8e4m3fn.
    #[serde(rename = "float8_e4m3fn")]
    Float8E4m3fn,
    /// f8e5m2.
    #[serde(rename = "float8_e5m2")]
    Float8E5m2,
}

impl Dtype {
    /// Storage bits per element.
    pub fn bits(self) -> u64 {
        match self {
            Dtype::Int8 | Dtype::Float8E4m3fn | Dtype::Float8E5m2 => 8,
            Dtype::Bfloat16 | Dtype::Float16 => 16,
            Dtype::Float32 | Dtype::Int32 => 32,
        }
    }
    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        self.bits() / 8
    }
    /// The XLA primitive type name (`bf16`, `f32`, `s8`, ...).
    pub fn xla_name(self) -> &'static str {
        match self {
            Dtype::Bfloat16 => "bf16",
            Dtype::Float16 => "f16",
            Dtype::Float32 => "f32",
            Dtype::Int8 => "s8",
            Dtype::Int32 => "s32",
            Dtype::Float8E4m3fn => "f8e4m3fn",
            Dtype::Float8E5m2 => "f8e5m2",
        }
    }
    /// The result type of a matmul on this input type, as in the compiled records: int8 accumulates into s32,
    /// fp8 returns bf16.
    pub fn matmul_result(self) -> Dtype {
        match self {
            Dtype::Int8 => Dtype::Int32,
            Dtype::Float8E4m3fn | Dtype::Float8E5m2 => Dtype::Bfloat16,
            other => other,
        }
    }
    /// Whether this is an 8-bit float type.
    pub fn is_fp8(self) -> bool {
        matches!(self, Dtype::Float8E4m3fn | Dtype::Float8E5m2)
    }
}

/// `{"shape": [...], "dtype": ...}`: elementwise ops, reductions and transposes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeParams {
    /// Logical dims, major to minor.
    pub shape: Vec<i64>,
    /// Element type.
    pub dtype: Dtype,
}

/// `{"shape", "dtype", "to"}`: an element type conversion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvertParams {
    /// Logical dims, major to minor.
    pub shape: Vec<i64>,
    /// Source element type.
    pub dtype: Dtype,
    /// Destination element type.
    pub to: Dtype,
}

/// `{"M", "K", "N", "dtype"}`: `[M,K] @ [K,N]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatmulParams {
    /// Rows of the left operand and of the result.
    #[serde(rename = "M")]
    pub m: i64,
    /// Contracting dim.
    #[serde(rename = "K")]
    pub k: i64,
    /// Columns of the right operand and of the result.
    #[serde(rename = "N")]
    pub n: i64,
    /// Operand element type.
    pub dtype: Dtype,
}

/// `{"B", "M", "K", "N", "dtype"}`: `[B,M,K] @ [B,K,N]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchedMatmulParams {
    /// Batch size.
    #[serde(rename = "B")]
    pub b: i64,
    /// Rows of each left operand.
    #[serde(rename = "M")]
    pub m: i64,
    /// Contracting dim.
    #[serde(rename = "K")]
    pub k: i64,
    /// Columns of each right operand.
    #[serde(rename = "N")]
    pub n: i64,
    /// Operand element type.
    pub dtype: Dtype,
}

/// `{"B", "Din", "Dout", "dtype"}`: `relu(x[B,Din] @ W[Din,Dout] + b[Dout])`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MlpParams {
    /// Batch rows.
    #[serde(rename = "B")]
    pub b: i64,
    /// Input features.
    #[serde(rename = "Din")]
    pub din: i64,
    /// Output features.
    #[serde(rename = "Dout")]
    pub dout: i64,
    /// Element type.
    pub dtype: Dtype,
}

/// Spatial padding of a convolution, as jax names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConvPadding {
    /// Output spatial size = ceil(input / stride).
    #[serde(rename = "SAME")]
    Same,
    /// No padding: output = floor((input - kernel) / stride) + 1.
    #[serde(rename = "VALID")]
    Valid,
}

/// `{"input": [N,H,W,C], "kernel_hwio": [KH,KW,Cin,Cout], "stride", "padding", "dtype"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvParams {
    /// Input dims N, H, W, C.
    pub input: Vec<i64>,
    /// Kernel dims KH, KW, Cin, Cout.
    pub kernel_hwio: Vec<i64>,
    /// Spatial stride (same in H and W).
    pub stride: i64,
    /// SAME or VALID.
    pub padding: ConvPadding,
    /// Element type.
    pub dtype: Dtype,
}

/// `{"shapes": [[...], ...], "axis", "dtype"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConcatParams {
    /// Operand dims; all equal except along `axis`.
    pub shapes: Vec<Vec<i64>>,
    /// Concatenation axis.
    pub axis: i64,
    /// Element type.
    pub dtype: Dtype,
}

/// One TensorCore op, deserialisable from an ops.jsonl record's `{"op": ..., "params": {...}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", content = "params", rename_all = "snake_case")]
pub enum OpSpec {
    /// Dense matmul.
    Matmul(MatmulParams),
    /// Batched matmul.
    BatchedMatmul(BatchedMatmulParams),
    /// Elementwise add of two arrays of the same shape.
    Add(ShapeParams),
    /// Elementwise multiply.
    Mul(ShapeParams),
    /// Elementwise exp.
    Exp(ShapeParams),
    /// Elementwise tanh.
    Tanh(ShapeParams),
    /// Sum over the most-minor dim.
    ReduceSumMinor(ShapeParams),
    /// Sum over the most-major dim.
    ReduceSumMajor(ShapeParams),
    /// Max over the most-minor dim.
    ReduceMaxMinor(ShapeParams),
    /// Swap the two dims of a rank-2 array.
    Transpose2d(ShapeParams),
    /// `shape` is N,C,H,W; result N,H,W,C.
    TransposeNchwToNhwc(ShapeParams),
    /// `shape` is N,H,W,C; result N,C,H,W.
    TransposeNhwcToNchw(ShapeParams),
    /// 2-D convolution, NHWC input, HWIO kernel.
    Conv2dNhwc(ConvParams),
    /// Concatenation along an axis.
    Concatenate(ConcatParams),
    /// relu(x @ W + b), fused as XLA fuses it.
    MlpLayer(MlpParams),
    /// Element type conversion (not in the calibration records; costed as a streaming VPU op).
    Convert(ConvertParams),
}

/// The op names [`OpSpec`] accepts, in schema order.
pub const OP_NAMES: &[&str] = &[
    "matmul",
    "batched_matmul",
    "add",
    "mul",
    "exp",
    "tanh",
    "reduce_sum_minor",
    "reduce_sum_major",
    "reduce_max_minor",
    "transpose2d",
    "transpose_nchw_to_nhwc",
    "transpose_nhwc_to_nchw",
    "conv2d_nhwc",
    "concatenate",
    "mlp_layer",
    "convert",
];

/// Points a serde message at the `params` field it is about: the field named in backquotes (missing/unknown
/// field), else the field whose value is the offending text or number.
fn serde_error_field(msg: &str, params: &serde_json::Value) -> String {
    let quoted = msg.split('`').nth(1).unwrap_or("");
    let obj = match params.as_object() {
        Some(o) => o,
        None => return "params".into(),
    };
    if msg.starts_with("missing field") || msg.starts_with("unknown field") {
        return format!("params.{quoted}");
    }
    for (k, v) in obj {
        let hit = match v {
            serde_json::Value::String(s) => s == quoted || msg.contains(&format!("\"{s}\"")),
            serde_json::Value::Number(n) => msg.contains(&format!("`{n}`")) || msg.contains(&format!(" {n},")),
            serde_json::Value::Array(a) => {
                a.iter().any(|x| !x.is_number() && !x.is_array()) && msg.contains("expected")
            }
            _ => msg.contains(&format!("{v}")),
        };
        if hit {
            return format!("params.{k}");
        }
    }
    "params".into()
}

fn dim(field: &str, v: i64) -> Result<u64, OpError> {
    if v <= 0 {
        return Err(OpError::InvalidParam {
            field: field.to_string(),
            reason: format!("must be > 0, got {v}"),
        });
    }
    Ok(v as u64)
}

/// Largest element count of one array the model accepts (2^40: 1 Ti elements, far beyond any HBM), so that
/// byte and cycle arithmetic cannot overflow.
pub const MAX_ARRAY_ELEMENTS: u64 = 1 << 40;

fn bounded(field: &str, dims: &[u64]) -> Result<(), OpError> {
    let n = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
    match n {
        Some(n) if n <= MAX_ARRAY_ELEMENTS => Ok(()),
        _ => Err(OpError::InvalidParam {
            field: field.to_string(),
            reason: format!("{dims:?} has more than {MAX_ARRAY_ELEMENTS} elements"),
        }),
    }
}

fn dims(field: &str, v: &[i64], rank: Option<usize>) -> Result<Vec<u64>, OpError> {
    if let Some(r) = rank {
        if v.len() != r {
            return Err(OpError::InvalidParam {
                field: field.to_string(),
                reason: format!("must have {r} dims, got {}", v.len()),
            });
        }
    }
    if v.is_empty() {
        return Err(OpError::InvalidParam {
            field: field.to_string(),
            reason: "must have at least 1 dim".into(),
        });
    }
    let d: Vec<u64> = v
        .iter()
        .enumerate()
        .map(|(i, &d)| dim(&format!("{field}[{i}]"), d))
        .collect::<Result<_, _>>()?;
    bounded(field, &d)?;
    Ok(d)
}

/// A validated op with unsigned dims, what the lowering consumes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Checked {
    Matmul {
        b: u64,
        m: u64,
        k: u64,
        n: u64,
        dtype: Dtype,
        mlp: bool,
    },
    Elementwise {
        kind: EwKind,
        shape: Vec<u64>,
        dtype: Dtype,
        to: Dtype,
    },
    Reduce {
        kind: ReduceKind,
        shape: Vec<u64>,
        dtype: Dtype,
    },
    Transpose {
        kind: TransposeKind,
        shape: Vec<u64>,
        dtype: Dtype,
    },
    Conv {
        input: [u64; 4],
        kernel: [u64; 4],
        stride: u64,
        padding: ConvPadding,
        dtype: Dtype,
    },
    Concat {
        shapes: Vec<Vec<u64>>,
        axis: usize,
        dtype: Dtype,
    },
}

/// Elementwise op class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EwKind {
    /// Two inputs, one output (add, mul).
    Binary,
    /// One input, one output through the transcendental unit (exp, tanh).
    Unary,
    /// One input converted to another type.
    Convert,
}

/// Reduction class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReduceKind {
    /// Over the minor dim (cross-lane).
    Minor,
    /// Over the major dim (vreg-wise accumulate).
    Major,
}

/// Transpose class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TransposeKind {
    /// Rank 2 swap: minor dim changes, goes through the transpose unit.
    TwoD,
    /// NCHW -> NHWC.
    NchwToNhwc,
    /// NHWC -> NCHW.
    NhwcToNchw,
}

impl OpSpec {
    /// The op name as in the schema.
    pub fn name(&self) -> &'static str {
        match self {
            OpSpec::Matmul(_) => "matmul",
            OpSpec::BatchedMatmul(_) => "batched_matmul",
            OpSpec::Add(_) => "add",
            OpSpec::Mul(_) => "mul",
            OpSpec::Exp(_) => "exp",
            OpSpec::Tanh(_) => "tanh",
            OpSpec::ReduceSumMinor(_) => "reduce_sum_minor",
            OpSpec::ReduceSumMajor(_) => "reduce_sum_major",
            OpSpec::ReduceMaxMinor(_) => "reduce_max_minor",
            OpSpec::Transpose2d(_) => "transpose2d",
            OpSpec::TransposeNchwToNhwc(_) => "transpose_nchw_to_nhwc",
            OpSpec::TransposeNhwcToNchw(_) => "transpose_nhwc_to_nchw",
            OpSpec::Conv2dNhwc(_) => "conv2d_nhwc",
            OpSpec::Concatenate(_) => "concatenate",
            OpSpec::MlpLayer(_) => "mlp_layer",
            OpSpec::Convert(_) => "convert",
        }
    }

    /// Parses one `{"op": ..., "params": {...}}` object, with errors that name the offending field.
    pub fn from_json(text: &str) -> Result<OpSpec, OpError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| OpError::Parse { reason: e.to_string() })?;
        OpSpec::from_value(&value)
    }

    /// Like [`OpSpec::from_json`] from an already parsed value.
    pub fn from_value(value: &serde_json::Value) -> Result<OpSpec, OpError> {
        let obj = value.as_object().ok_or_else(|| OpError::Parse {
            reason: "expected a JSON object".into(),
        })?;
        let op = obj
            .get("op")
            .ok_or_else(|| OpError::InvalidParam {
                field: "op".into(),
                reason: "missing".into(),
            })?
            .as_str()
            .ok_or_else(|| OpError::InvalidParam {
                field: "op".into(),
                reason: "must be a string".into(),
            })?;
        if !OP_NAMES.contains(&op) {
            return Err(OpError::UnknownOp { op: op.to_string() });
        }
        if !obj.contains_key("params") {
            return Err(OpError::InvalidParam {
                field: "params".into(),
                reason: "missing".into(),
            });
        }
        let spec: OpSpec = serde_json::from_value(value.clone()).map_err(|e| OpError::InvalidParam {
            field: serde_error_field(&e.to_string(), &obj["params"]),
            reason: format!("{e} (op `{op}`)"),
        })?;
        spec.check()?;
        Ok(spec)
    }

    /// Validates dims and returns the lowering's view of the op.
    pub(crate) fn check(&self) -> Result<Checked, OpError> {
        let c = self.check_fields()?;
        if let Checked::Matmul { b, m, k, n, .. } = &c {
            bounded("params", &[*b, *m, *k])?;
            bounded("params", &[*b, *k, *n])?;
            bounded("params", &[*b, *m, *n])?;
        }
        if let Checked::Conv { input, kernel, .. } = &c {
            bounded("params", &[input[0], input[1], input[2], kernel[3]])?;
            bounded("params", &[input[0], input[1], input[2], kernel[0], kernel[1]])?;
        }
        Ok(c)
    }

    fn check_fields(&self) -> Result<Checked, OpError> {
        let shape_op = |p: &ShapeParams| dims("params.shape", &p.shape, None);
        Ok(match self {
            OpSpec::Matmul(p) => Checked::Matmul {
                b: 1,
                m: dim("params.M", p.m)?,
                k: dim("params.K", p.k)?,
                n: dim("params.N", p.n)?,
                dtype: p.dtype,
                mlp: false,
            },
            OpSpec::BatchedMatmul(p) => Checked::Matmul {
                b: dim("params.B", p.b)?,
                m: dim("params.M", p.m)?,
                k: dim("params.K", p.k)?,
                n: dim("params.N", p.n)?,
                dtype: p.dtype,
                mlp: false,
            },
            OpSpec::MlpLayer(p) => Checked::Matmul {
                b: 1,
                m: dim("params.B", p.b)?,
                k: dim("params.Din", p.din)?,
                n: dim("params.Dout", p.dout)?,
                dtype: p.dtype,
                mlp: true,
            },
            OpSpec::Add(p) | OpSpec::Mul(p) => Checked::Elementwise {
                kind: EwKind::Binary,
                shape: shape_op(p)?,
                dtype: p.dtype,
                to: p.dtype,
            },
            OpSpec::Exp(p) | OpSpec::Tanh(p) => Checked::Elementwise {
                kind: EwKind::Unary,
                shape: shape_op(p)?,
                dtype: p.dtype,
                to: p.dtype,
            },
            OpSpec::Convert(p) => Checked::Elementwise {
                kind: EwKind::Convert,
                shape: dims("params.shape", &p.shape, None)?,
                dtype: p.dtype,
                to: p.to,
            },
            OpSpec::ReduceSumMinor(p) | OpSpec::ReduceMaxMinor(p) => Checked::Reduce {
                kind: ReduceKind::Minor,
                shape: shape_op(p)?,
                dtype: p.dtype,
            },
            OpSpec::ReduceSumMajor(p) => Checked::Reduce {
                kind: ReduceKind::Major,
                shape: shape_op(p)?,
                dtype: p.dtype,
            },
            OpSpec::Transpose2d(p) => Checked::Transpose {
                kind: TransposeKind::TwoD,
                shape: dims("params.shape", &p.shape, Some(2))?,
                dtype: p.dtype,
            },
            OpSpec::TransposeNchwToNhwc(p) => Checked::Transpose {
                kind: TransposeKind::NchwToNhwc,
                shape: dims("params.shape", &p.shape, Some(4))?,
                dtype: p.dtype,
            },
            OpSpec::TransposeNhwcToNchw(p) => Checked::Transpose {
                kind: TransposeKind::NhwcToNchw,
                shape: dims("params.shape", &p.shape, Some(4))?,
                dtype: p.dtype,
            },
            OpSpec::Conv2dNhwc(p) => {
                let i = dims("params.input", &p.input, Some(4))?;
                let k = dims("params.kernel_hwio", &p.kernel_hwio, Some(4))?;
                let stride = dim("params.stride", p.stride)?;
                if k[2] != i[3] {
                    return Err(OpError::InvalidParam {
                        field: "params.kernel_hwio[2]".into(),
                        reason: format!("input channels {} do not match input[3] = {}", k[2], i[3]),
                    });
                }
                if p.padding == ConvPadding::Valid && (k[0] > i[1] || k[1] > i[2]) {
                    return Err(OpError::InvalidParam {
                        field: "params.kernel_hwio".into(),
                        reason: "kernel larger than the input with VALID padding".into(),
                    });
                }
                Checked::Conv {
                    input: [i[0], i[1], i[2], i[3]],
                    kernel: [k[0], k[1], k[2], k[3]],
                    stride,
                    padding: p.padding,
                    dtype: p.dtype,
                }
            }
            OpSpec::Concatenate(p) => {
                if p.shapes.is_empty() {
                    return Err(OpError::InvalidParam {
                        field: "params.shapes".into(),
                        reason: "must list at least one operand".into(),
                    });
                }
                let shapes = p
                    .shapes
                    .iter()
                    .enumerate()
                    .map(|(i, s)| dims(&format!("params.shapes[{i}]"), s, None))
                    .collect::<Result<Vec<_>, _>>()?;
                let rank = shapes[0].len();
                if p.axis < 0 || p.axis as usize >= rank {
                    return Err(OpError::InvalidParam {
                        field: "params.axis".into(),
                        reason: format!("must be in 0..{rank}, got {}", p.axis),
                    });
                }
                let axis = p.axis as usize;
                for (i, s) in shapes.iter().enumerate() {
                    let same = s.len() == rank
                        && s.iter()
                            .zip(&shapes[0])
                            .enumerate()
                            .all(|(d, (a, b))| d == axis || a == b);
                    if !same {
                        return Err(OpError::InvalidParam {
                            field: format!("params.shapes[{i}]"),
                            reason: format!("{s:?} does not match {:?} outside axis {axis}", shapes[0]),
                        });
                    }
                }
                Checked::Concat {
                    shapes,
                    axis,
                    dtype: p.dtype,
                }
            }
        })
    }
}

/// A checked matmul `[m, k] x [k, n]` of `dtype`, for the op model's unit tests.
#[cfg(test)]
pub(crate) fn checked_matmul(m: u64, k: u64, n: u64, dtype: &str) -> Checked {
    OpSpec::from_json(&format!(
        r#"{{"op":"matmul","params":{{"M":{m},"K":{k},"N":{n},"dtype":"{dtype}"}}}}"#
    ))
    .and_then(|op| op.check())
    .expect("a valid matmul spec")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_record_schema() {
        let s =
            OpSpec::from_json(r#"{"op":"matmul","params":{"M":1000,"K":3000,"N":500,"dtype":"bfloat16"}}"#).unwrap();
        assert_eq!(
            s,
            OpSpec::Matmul(MatmulParams {
                m: 1000,
                k: 3000,
                n: 500,
                dtype: Dtype::Bfloat16
            })
        );
        let c = OpSpec::from_json(
            r#"{"op":"conv2d_nhwc","params":{"input":[8,56,56,64],"kernel_hwio":[3,3,64,64],"stride":1,"padding":"SAME","dtype":"bfloat16"}}"#,
        )
        .unwrap();
        assert_eq!(c.name(), "conv2d_nhwc");
        let f8 = OpSpec::from_json(r#"{"op":"matmul","params":{"M":1,"K":2,"N":3,"dtype":"float8_e4m3fn"}}"#).unwrap();
        assert!(matches!(
            f8,
            OpSpec::Matmul(MatmulParams {
                dtype: Dtype::Float8E4m3fn,
                ..
            })
        ));
    }

    #[test]
    fn errors_name_the_field() {
        let e = OpSpec::from_json(r#"{"op":"matmul","params":{"M":10,"N":5,"dtype":"bfloat16"}}"#).unwrap_err();
        assert!(e.to_string().contains("`K`"), "{e}");
        let e = OpSpec::from_json(r#"{"op":"matmul","params":{"M":0,"K":1,"N":5,"dtype":"bfloat16"}}"#).unwrap_err();
        assert!(e.to_string().contains("params.M"), "{e}");
        let e = OpSpec::from_json(r#"{"op":"add","params":{"shape":[3,-5],"dtype":"float32"}}"#).unwrap_err();
        assert!(e.to_string().contains("params.shape[1]"), "{e}");
        let e = OpSpec::from_json(r#"{"op":"frobnicate","params":{}}"#).unwrap_err();
        assert!(e.to_string().contains("frobnicate"), "{e}");
        let e = OpSpec::from_json(r#"{"op":"add","params":{"shape":[3],"dtype":"float64"}}"#).unwrap_err();
        assert!(e.to_string().contains("float64"), "{e}");
        let e =
            OpSpec::from_json(r#"{"op":"concatenate","params":{"shapes":[[2,3],[4,5]],"axis":0,"dtype":"float32"}}"#)
                .unwrap_err();
        assert!(e.to_string().contains("params.shapes[1]"), "{e}");
    }
}
