//! Ids as a host passes them: per feature, dense [rows, valency] or ragged (values + row splits),
//! with optional weights; read from the contract's NPZ layout.

use std::collections::BTreeMap;

use super::error::PreprocessError;

/// One feature's ids in ragged form (dense input has equal-length rows).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FeatureIds {
    /// All ids, row after row.
    pub values: Vec<i32>,
    /// Row boundaries into `values` (rows + 1 entries, starting at 0).
    pub row_splits: Vec<usize>,
    /// Weights aligned with `values` (none: all 1.0).
    pub weights: Option<Vec<f32>>,
}

impl FeatureIds {
    /// Dense ids of shape [rows, valency], row-major.
    pub fn dense(values: Vec<i32>, rows: usize, valency: usize) -> Result<Self, PreprocessError> {
        if values.len() != rows * valency {
            return Err(PreprocessError::Input(format!(
                "dense ids have {} values, expected rows x valency = {rows} x {valency}",
                values.len()
            )));
        }
        Ok(FeatureIds {
            values,
            row_splits: (0..=rows).map(|r| r * valency).collect(),
            weights: None,
        })
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.row_splits.len().saturating_sub(1)
    }

    /// Ids in all.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there are no ids.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Checks row splits, weights and ids.
    pub fn validate(&self, name: &str) -> Result<(), PreprocessError> {
        let bad = |m: String| Err(PreprocessError::Input(format!("{name}: {m}")));
        if self.row_splits.first() != Some(&0) || self.row_splits.last() != Some(&self.values.len()) {
            return bad(format!(
                "row_splits must start at 0 and end at the number of values ({})",
                self.values.len()
            ));
        }
        if self.row_splits.windows(2).any(|w| w[0] > w[1]) {
            return bad("row_splits must not decrease".into());
        }
        if let Some(w) = &self.weights {
            if w.len() != self.values.len() {
                return bad(format!(
                    "weights have {} entries, ids have {}",
                    w.len(),
                    self.values.len()
                ));
            }
        }
        // The sign bits ORed first (vectorised), the position only when one is set.
        if self.values.iter().fold(0i32, |a, &v| a | v) < 0 {
            let pos = self.values.iter().position(|&v| v < 0).unwrap_or(0);
            return bad(format!("id {} at position {pos} is negative", self.values[pos]));
        }
        Ok(())
    }
}

/// All features' ids of one batch, by feature name.
pub type BatchIds = BTreeMap<String, FeatureIds>;

/// Reads a batch from the contract's NPZ layout: per feature `N` (dense int32 [rows, valency]) or
/// `N.values` (int32) + `N.row_splits` (int64), and optional `N.weights` (float32).
pub fn read_npz(path: &std::path::Path) -> Result<BatchIds, PreprocessError> {
    let file = std::fs::File::open(path).map_err(|e| PreprocessError::Input(format!("{}: {e}", path.display())))?;
    read_npz_from(std::io::BufReader::with_capacity(1 << 20, file)).map_err(|e| match e {
        PreprocessError::Input(m) if m.starts_with("not a valid npz") => {
            PreprocessError::Input(format!("{}: {m}", path.display()))
        }
        e => e,
    })
}

/// The shape of every dense array (a name without a dot) in the NPZ at `path`, from the array
/// headers alone.
pub fn npz_shapes(path: &std::path::Path) -> Result<BTreeMap<String, Vec<u64>>, PreprocessError> {
    let io = |e: String| PreprocessError::Input(format!("{}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| io(e.to_string()))?;
    let mut npz =
        zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| io(format!("not a valid npz file: {e}")))?;
    let names: Vec<String> = npz
        .file_names()
        .filter_map(npyz::npz::array_name_from_file_name)
        .filter(|n| !n.contains('.'))
        .map(str::to_string)
        .collect();
    let mut shapes = BTreeMap::new();
    for name in names {
        let (mut member, _, limit) = open_member(&mut npz, &npyz::npz::file_name_from_array_name(&name))
            .map_err(|e| io(format!("array '{name}'{e}")))?;
        let layout = super::npy::read_header(&mut std::io::Read::take(&mut member, limit), limit)
            .map_err(|e| io(format!("array '{name}': {e}")))?;
        shapes.insert(name, layout.header.shape);
    }
    Ok(shapes)
}

/// Opens a zip member (errors start with " is missing" or ": ") with its declared size and the most
/// bytes it may be read to: never trusting the declared size beyond what the stored bytes can inflate
/// to (deflate expands at most ~1032:1), and never beyond what is declared.
fn open_member<'a, R: std::io::Read + std::io::Seek>(
    npz: &'a mut zip::ZipArchive<R>,
    member_name: &str,
) -> Result<(zip::read::ZipFile<'a>, u64, u64), String> {
    let member = npz.by_name(member_name).map_err(|e| match e {
        zip::result::ZipError::FileNotFound => " is missing".to_string(),
        e => format!(": {e}"),
    })?;
    let declared = member.size();
    let limit = match member.compression() {
        zip::CompressionMethod::Stored => member.compressed_size(),
        _ => member.compressed_size().saturating_mul(1032).saturating_add(1024),
    }
    .min(declared);
    Ok((member, declared, limit))
}

/// Reads a zip member whole (errors start with " is missing" or ": "), bounded as [`open_member`] says.
pub fn read_zip_member<R: std::io::Read + std::io::Seek>(
    npz: &mut zip::ZipArchive<R>,
    member_name: &str,
) -> Result<Vec<u8>, String> {
    let (mut member, declared, limit) = open_member(npz, member_name)?;
    let mut bytes = Vec::with_capacity(limit.min(64 << 20) as usize);
    std::io::Read::read_to_end(
        &mut std::io::Read::take(&mut member, limit.saturating_add(1)),
        &mut bytes,
    )
    .map_err(|e| format!(": {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            ": the zip member holds more than its declared {declared} bytes"
        ));
    }
    Ok(bytes)
}

/// [`read_npz`] from any seekable reader (an open file, or bytes in a `Cursor`).
pub fn read_npz_from<R: std::io::Read + std::io::Seek>(reader: R) -> Result<BatchIds, PreprocessError> {
    let mut npz =
        zip::ZipArchive::new(reader).map_err(|e| PreprocessError::Input(format!("not a valid npz file: {e}")))?;
    let names: Vec<String> = npz
        .file_names()
        .filter_map(npyz::npz::array_name_from_file_name)
        .map(|s| s.to_string())
        .collect();
    let mut batch = BatchIds::new();
    // Each member is read in one bulk read (checksummed in bulk) after its header: element-sized reads
    // through the zip stream cost more than the preprocessing itself.
    let read = |npz: &mut zip::ZipArchive<_>, key: &str| -> Result<(Vec<u64>, Array), PreprocessError> {
        let (mut member, declared, limit) = open_member(npz, &npyz::npz::file_name_from_array_name(key))
            .map_err(|e| PreprocessError::Input(format!("array '{key}'{e}")))?;
        // The array is read from the member's stream straight into its typed vector: a stored member
        // is copied once from the file, a deflated one inflated once, in blocks as large as the array.
        let mut stream = std::io::Read::take(&mut member, limit.saturating_add(1));
        let arr = super::npy::read_npy_from(&mut stream, limit)
            .map_err(|e| PreprocessError::Input(format!("array '{key}': {e}")))?;
        // The member must end where the array does (this read also checks its CRC), and hold
        // exactly the bytes its zip headers declare.
        let mut rest = [0u8; 1];
        match std::io::Read::read(&mut stream, &mut rest) {
            Ok(0) => {
                let held = limit.saturating_add(1) - stream.limit();
                if held != declared {
                    return Err(PreprocessError::Input(format!(
                        "array '{key}': the zip headers declare {declared} bytes, the member holds {held}"
                    )));
                }
            }
            Ok(_) => {
                return Err(PreprocessError::Input(format!(
                    "array '{key}': the zip member has bytes past the end of the array (declared size {declared})"
                )))
            }
            Err(e) => return Err(PreprocessError::Input(format!("array '{key}': {e}"))),
        }
        let shape = arr.shape;
        let data = match arr.data {
            super::npy::NpyData::I32(v) => Array::I32(v),
            super::npy::NpyData::I64(v) => Array::I64(v),
            super::npy::NpyData::F32(v) => Array::F32(v),
        };
        Ok((shape, data))
    };
    for name in names.iter().filter(|n| !n.contains('.')) {
        let (shape, data) = read(&mut npz, name)?;
        let values = int32_ids(name, data)?;
        if shape.len() != 2 {
            return Err(PreprocessError::Input(format!(
                "array '{name}' must be 2-D [rows, valency], got {shape:?}"
            )));
        }
        let (rows, valency) = (
            usize::try_from(shape[0]).map_err(|_| PreprocessError::Input(format!("array '{name}': too many rows")))?,
            usize::try_from(shape[1]).map_err(|_| PreprocessError::Input(format!("array '{name}': too wide")))?,
        );
        batch.insert(name.clone(), FeatureIds::dense(values, rows, valency)?);
    }
    for name in names.iter().filter_map(|n| n.strip_suffix(".values")) {
        let (_, data) = read(&mut npz, &format!("{name}.values"))?;
        let values = int32_ids(&format!("{name}.values"), data)?;
        let (_, splits) = read(&mut npz, &format!("{name}.row_splits"))?;
        let negative = |at: usize, x: i64| {
            PreprocessError::Input(format!(
                "array '{name}.row_splits': entry {at} is {x}; row splits must be >= 0, non-decreasing from 0 to the number of values"
            ))
        };
        let split = |(at, x): (usize, i64)| usize::try_from(x).map_err(|_| negative(at, x));
        let row_splits: Vec<usize> = match splits {
            Array::I64(v) => v.into_iter().enumerate().map(split).collect::<Result<_, _>>()?,
            Array::I32(v) => v
                .into_iter()
                .map(i64::from)
                .enumerate()
                .map(split)
                .collect::<Result<_, _>>()?,
            Array::F32(_) => {
                return Err(PreprocessError::Input(format!(
                    "array '{name}.row_splits' must be int64"
                )))
            }
        };
        batch.insert(
            name.to_string(),
            FeatureIds {
                values,
                row_splits,
                weights: None,
            },
        );
    }
    for name in names.iter().filter_map(|n| n.strip_suffix(".weights")) {
        let (_, data) = read(&mut npz, &format!("{name}.weights"))?;
        let Array::F32(w) = data else {
            return Err(PreprocessError::Input(format!(
                "array '{name}.weights' must be float32"
            )));
        };
        let f = batch
            .get_mut(name)
            .ok_or_else(|| PreprocessError::Input(format!("array '{name}.weights' has no ids '{name}'")))?;
        f.weights = Some(w);
    }
    for n in &names {
        if let Some(base) = n.strip_suffix(".row_splits") {
            if !names.iter().any(|x| x == &format!("{base}.values")) {
                return Err(PreprocessError::Input(format!("array '{n}' has no '{base}.values'")));
            }
        }
    }
    Ok(batch)
}

/// Ids as int32: an int64 array (numpy's default integer) is taken when every value fits int32,
/// else refused naming the first that does not.
fn int32_ids(name: &str, data: Array) -> Result<Vec<i32>, PreprocessError> {
    match data {
        Array::I32(v) => Ok(v),
        Array::I64(v) => v
            .iter()
            .enumerate()
            .map(|(at, &x)| {
                i32::try_from(x).map_err(|_| {
                    PreprocessError::Input(format!(
                        "array '{name}': id {x} at position {at} does not fit int32 (ids are int32 in the contract)"
                    ))
                })
            })
            .collect(),
        Array::F32(_) => Err(PreprocessError::Input(format!(
            "array '{name}' must be int32 ids (or int64 ids that fit int32), got float32"
        ))),
    }
}

enum Array {
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
}
