//! SCALE-Sim topology CSV files. Conv form: `Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width,
//! Channels, Num Filter, Strides,` (trailing comma allowed). GEMM form: `Layer, M, N, K,` where the ifmap is MxK
//! and the filter KxN. The form is chosen by the number of numeric fields (3 for GEMM, 7 for conv).

use super::SystolicError;

/// One layer as a GEMM-able shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    /// Layer name.
    pub name: String,
    /// Output pixels (rows of the ifmap operand matrix).
    pub m: u64,
    /// Filters (columns of the output).
    pub n: u64,
    /// Window elements: filter height x width x channels.
    pub k: u64,
}

impl Layer {
    /// A GEMM layer `m x k` times `k x n`.
    pub fn gemm(name: &str, m: u64, n: u64, k: u64) -> Self {
        Layer {
            name: name.to_string(),
            m,
            n,
            k,
        }
    }
    /// A conv layer without padding, as SCALE-Sim models it: output `(H - Fh) / s + 1` by `(W - Fw) / s + 1`.
    pub fn conv(name: &str, dims: [u64; 7]) -> Result<Self, String> {
        let [ih, iw, fh, fw, ch, nf, s] = dims;
        if dims.contains(&0) {
            return Err("every dimension and the stride must be at least 1".into());
        }
        if fh > ih || fw > iw {
            return Err(format!("filter {fh}x{fw} is larger than the ifmap {ih}x{iw}"));
        }
        let (oh, ow) = ((ih - fh) / s + 1, (iw - fw) / s + 1);
        Ok(Layer {
            name: name.to_string(),
            m: oh * ow,
            n: nf,
            k: fh * fw * ch,
        })
    }
    /// `(m, n, k)`.
    pub fn gemm_dims(&self) -> (u64, u64, u64) {
        (self.m, self.n, self.k)
    }
}

/// The layers of a topology file, in order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Topology {
    /// Layers in file order.
    pub layers: Vec<Layer>,
}

impl Topology {
    /// Parses a topology CSV (a header line, then one layer per line).
    pub fn parse(text: &str) -> Result<Self, SystolicError> {
        let mut layers = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let fields: Vec<&str> = raw.split(',').map(str::trim).collect();
            let fields: Vec<&str> = match fields.iter().rposition(|f| !f.is_empty()) {
                Some(last) => fields[..=last].to_vec(),
                None => continue,
            };
            if line_no == 1 || fields[0].starts_with('#') {
                continue; // header or comment
            }
            let err = |msg: String| SystolicError::Topology { line: line_no, msg };
            let nums = fields[1..]
                .iter()
                .map(|f| {
                    f.parse::<u64>()
                        .map_err(|_| err(format!("`{f}` is not a non-negative integer")))
                })
                .collect::<Result<Vec<u64>, _>>()?;
            let layer = match nums.len() {
                3 => {
                    if nums.contains(&0) {
                        return Err(err("M, N and K must be at least 1".into()));
                    }
                    Layer::gemm(fields[0], nums[0], nums[1], nums[2])
                }
                7 => Layer::conv(
                    fields[0],
                    [nums[0], nums[1], nums[2], nums[3], nums[4], nums[5], nums[6]],
                )
                .map_err(err)?,
                n => return Err(err(format!("expected 3 numbers (M, N, K) or 7 (conv layer), got {n}"))),
            };
            layers.push(layer);
        }
        Ok(Topology { layers })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conv_and_gemm_rows() {
        let t = Topology::parse(
            "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n\
             Conv1, 224, 224, 7, 7, 3, 64, 2,\nfc, 8, 1000, 2048,\n",
        )
        .unwrap();
        // (224 - 7) / 2 + 1 = 109 -> 109 x 109 output pixels; window 7*7*3.
        assert_eq!(
            t.layers[0],
            Layer {
                name: "Conv1".into(),
                m: 109 * 109,
                n: 64,
                k: 147
            }
        );
        assert_eq!(t.layers[1], Layer::gemm("fc", 8, 1000, 2048));
    }

    #[test]
    fn bad_rows_name_the_line() {
        let e = Topology::parse("h\nx, 1, 2\n").unwrap_err().to_string();
        assert_eq!(
            e,
            "topology line 2: expected 3 numbers (M, N, K) or 7 (conv layer), got 2"
        );
        let e = Topology::parse("h\nx, 1, -2, 3\n").unwrap_err().to_string();
        assert_eq!(e, "topology line 2: `-2` is not a non-negative integer");
    }
}
