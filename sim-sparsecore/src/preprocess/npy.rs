//! A strict NPY reader for the arrays of the preprocess contract: the header is validated before
//! anything is allocated (shape product by checked arithmetic, data length against the bytes present),
//! byte order is explicit, and Fortran-ordered arrays are transposed to row-major, never misread.

/// A decoded array: row-major data and its shape.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    /// Dimensions.
    pub shape: Vec<u64>,
    /// Row-major data.
    pub data: NpyData,
}

/// The element types of the contract.
#[derive(Clone, Debug, PartialEq)]
pub enum NpyData {
    /// `<i4`: ids.
    I32(Vec<i32>),
    /// `<i8`: row splits.
    I64(Vec<i64>),
    /// `<f4`: weights.
    F32(Vec<f32>),
}

/// What a header says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub descr: String,
    pub fortran: bool,
    pub shape: Vec<u64>,
    /// Bytes before the data (magic, version, length and the header text).
    pub data_offset: usize,
}

fn field<'a>(dict: &'a str, key: &str) -> Option<&'a str> {
    let at = dict.find(&format!("'{key}'"))?;
    let rest = &dict[at + key.len() + 2..];
    Some(rest.trim_start().strip_prefix(':')?.trim_start())
}

fn header(bytes: &[u8]) -> Result<Header, String> {
    const MAGIC: &[u8] = b"\x93NUMPY";
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err("not an NPY array (no \\x93NUMPY magic)".into());
    }
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10usize),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err("truncated NPY header".into());
            }
            (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            )
        }
        v => return Err(format!("NPY format version {v} (valid: 1, 2, 3)")),
    };
    let end = start
        .checked_add(len)
        .filter(|&e| e <= bytes.len())
        .ok_or("truncated NPY header")?;
    let dict = std::str::from_utf8(&bytes[start..end]).map_err(|_| "NPY header is not text")?;
    let descr = field(dict, "descr")
        .and_then(|r| r.strip_prefix('\''))
        .and_then(|r| r.split('\'').next())
        .ok_or("NPY header has no 'descr'")?
        .to_string();
    let fortran = match field(dict, "fortran_order") {
        Some(r) if r.starts_with("True") => true,
        Some(r) if r.starts_with("False") => false,
        _ => return Err("NPY header has no 'fortran_order' True/False".into()),
    };
    let shape_text = field(dict, "shape")
        .and_then(|r| r.strip_prefix('('))
        .and_then(|r| r.split(')').next())
        .ok_or("NPY header has no 'shape' tuple")?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u64>()
                .map_err(|_| format!("NPY shape entry '{s}' is not a size"))
        })
        .collect::<Result<Vec<u64>, String>>()?;
    Ok(Header {
        descr,
        fortran,
        shape,
        data_offset: end,
    })
}

/// Reads one array; `bytes` is the whole `.npy` member.
pub fn read_npy(bytes: &[u8]) -> Result<NpyArray, String> {
    let mut rest = bytes;
    let a = read_npy_from(&mut rest, bytes.len() as u64)?;
    if !rest.is_empty() {
        return Err(format!(
            "{} bytes past the end of the array (shape {:?}): the data is longer than the header declares",
            rest.len(),
            a.shape
        ));
    }
    Ok(a)
}

/// Elements read straight into a typed vector: one copy from the reader, none after (the bytes of
/// a little-endian array are its values on a little-endian host).
fn read_typed<T: Copy + Default, R: std::io::Read>(
    r: &mut R,
    count: usize,
    from_le: impl Fn(T) -> T,
) -> std::io::Result<Vec<T>> {
    let mut v = vec![T::default(); count];
    // SAFETY: T is i32, i64 or f32 (every bit pattern is a value, no padding); the byte view covers
    // exactly the vector's initialised elements and is dropped before `v` is used again.
    let bytes = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, count * std::mem::size_of::<T>()) };
    r.read_exact(bytes)?;
    if cfg!(target_endian = "big") {
        for x in &mut v {
            *x = from_le(*x);
        }
    }
    Ok(v)
}

/// The element types of the contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ElementKind {
    I32,
    I64,
    F32,
}

/// What a checked header says about the data after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DataLayout {
    pub header: Header,
    pub kind: ElementKind,
    /// Elements (the data is `count` x the element size, checked against `size`).
    pub count: usize,
}

/// Reads and checks the header of an array of `size` bytes (header included); the reader is left at
/// the first data byte.
pub(crate) fn read_header<R: std::io::Read>(r: &mut R, size: u64) -> Result<DataLayout, String> {
    let mut head = vec![0u8; 10.min(size as usize)];
    r.read_exact(&mut head)
        .map_err(|_| "not an NPY array (no \\x93NUMPY magic)".to_string())?;
    if head.len() == 10 && head[..6] == *b"\x93NUMPY" {
        if !matches!(head[6], 1..=3) {
            return Err(format!(
                "NPY format version {}.{} is not supported (1.0, 2.0 or 3.0)",
                head[6], head[7]
            ));
        }
        let len_bytes = if matches!(head[6], 2 | 3) { 4 } else { 2 };
        if len_bytes == 4 {
            let mut more = [0u8; 2];
            r.read_exact(&mut more)
                .map_err(|_| "truncated NPY header".to_string())?;
            head.extend_from_slice(&more);
        }
        let start = head.len();
        let len = if len_bytes == 4 {
            u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as u64
        } else {
            u16::from_le_bytes([head[8], head[9]]) as u64
        };
        if (start as u64).saturating_add(len) > size {
            return Err("truncated NPY header".into());
        }
        if len > 1 << 20 {
            return Err(format!("NPY header of {len} bytes (at most 1 MiB)"));
        }
        head.resize(start + len as usize, 0);
        r.read_exact(&mut head[start..])
            .map_err(|_| "truncated NPY header".to_string())?;
    }
    let h = header(&head)?;
    let (item, kind) = match h.descr.as_str() {
        "<i4" | "|i4" => (4usize, ElementKind::I32),
        "<i8" | "|i8" => (8, ElementKind::I64),
        "<f4" | "|f4" => (4, ElementKind::F32),
        d if d.starts_with('>') => {
            return Err(format!(
                "dtype {d} is big-endian; write little-endian arrays (e.g. arr.astype('<i4'))"
            ))
        }
        d => {
            return Err(format!(
                "dtype {d}; expected int32 ids (<i4), int64 row_splits (<i8) or float32 weights (<f4)"
            ))
        }
    };
    let count = h
        .shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| format!("shape {:?} has more elements than can be addressed", h.shape))?;
    let need = count
        .checked_mul(item as u64)
        .ok_or_else(|| format!("shape {:?} has more bytes than can be addressed", h.shape))?;
    // `size` bounds the member (exact unless a deflated member's declared size is larger than what it
    // inflates to); bytes past the array are the caller's to refuse.
    let have = size - h.data_offset as u64;
    if need > have {
        return Err(format!(
            "shape {:?} of {} needs {need} data bytes, the array holds {have}",
            h.shape, h.descr
        ));
    }
    let count = usize::try_from(count).map_err(|_| format!("shape {:?} does not fit in memory", h.shape))?;
    Ok(DataLayout { header: h, kind, count })
}

/// Reads one array of `size` bytes (header included) from a stream: the header is read and checked
/// first, then the data lands in its typed vector in one read (an inflating reader inflates in
/// blocks as large as the array). `size` may overstate the array (a deflated member's declared size);
/// refusing bytes past its end is the caller's job.
pub fn read_npy_from<R: std::io::Read>(r: &mut R, size: u64) -> Result<NpyArray, String> {
    let io = |e: std::io::Error| format!("reading the array: {e}");
    let DataLayout { header: h, kind, count } = read_header(r, size)?;
    let mut data = match kind {
        ElementKind::I32 => NpyData::I32(read_typed(r, count, i32::from_le).map_err(io)?),
        ElementKind::I64 => NpyData::I64(read_typed(r, count, i64::from_le).map_err(io)?),
        ElementKind::F32 => {
            NpyData::F32(read_typed(r, count, |x: f32| f32::from_bits(u32::from_le(x.to_bits()))).map_err(io)?)
        }
    };
    // Fortran order: the first index varies fastest. Transposed to row-major (2-D; 1-D is the same).
    if h.fortran && h.shape.len() == 2 {
        let (r, c) = (h.shape[0] as usize, h.shape[1] as usize);
        fn transpose<T: Copy>(v: &[T], r: usize, c: usize) -> Vec<T> {
            (0..r * c).map(|i| v[(i % c) * r + i / c]).collect()
        }
        data = match data {
            NpyData::I32(v) => NpyData::I32(transpose(&v, r, c)),
            NpyData::I64(v) => NpyData::I64(transpose(&v, r, c)),
            NpyData::F32(v) => NpyData::F32(transpose(&v, r, c)),
        };
    } else if h.fortran && h.shape.len() > 2 {
        return Err(format!(
            "a Fortran-ordered array of {} dimensions; the contract's arrays are 1-D or 2-D",
            h.shape.len()
        ));
    }
    Ok(NpyArray { shape: h.shape, data })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
        let dict = format!(
            "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
            if fortran { "True" } else { "False" }
        );
        let mut h = dict.into_bytes();
        while (10 + h.len() + 1) % 64 != 0 {
            h.push(b' ');
        }
        h.push(b'\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(h.len() as u16).to_le_bytes());
        out.extend_from_slice(&h);
        out.extend_from_slice(data);
        out
    }

    fn i32s(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn row_major_and_fortran_give_the_same_array() {
        // [[1, 2, 3], [4, 5, 6]] row-major; column-major stores 1 4 2 5 3 6.
        let c = read_npy(&npy("<i4", false, "(2, 3)", &i32s(&[1, 2, 3, 4, 5, 6]))).unwrap();
        let f = read_npy(&npy("<i4", true, "(2, 3)", &i32s(&[1, 4, 2, 5, 3, 6]))).unwrap();
        assert_eq!(c, f);
        assert_eq!(c.data, NpyData::I32(vec![1, 2, 3, 4, 5, 6]));
    }

    #[test]
    fn hostile_headers_are_errors_not_allocations() {
        let e = read_npy(&npy("<i4", false, "(4294967296, 4294967296, 16)", &[])).unwrap_err();
        assert!(e.contains("more elements"), "{e}");
        let e = read_npy(&npy("<i4", false, "(1000000000, 1000)", &i32s(&[1]))).unwrap_err();
        assert!(e.contains("needs 4000000000000 data bytes, the array holds 4"), "{e}");
        assert!(read_npy(&npy(">i4", false, "(1,)", &[0, 0, 0, 1]))
            .unwrap_err()
            .contains("big-endian"));
        assert!(read_npy(&npy("<f8", false, "(1,)", &[0; 8]))
            .unwrap_err()
            .contains("dtype <f8"));
        assert!(read_npy(b"\x93NUMPY\x01\x00\xff\xff{")
            .unwrap_err()
            .contains("truncated"));
        assert!(read_npy(b"hello").is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_give_an_array_or_an_error(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let _ = read_npy(&bytes);
            let mut with_magic = b"\x93NUMPY\x01\x00".to_vec();
            with_magic.extend_from_slice(&bytes);
            let _ = read_npy(&with_magic);
        }
    }
}
