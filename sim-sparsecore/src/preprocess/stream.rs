//! Statistics straight from an NPZ file, in bounded memory: every source SparseCore reads its own
//! rows of the uncompressed members (as `np.savez` writes them) block by block, checksumming and
//! counting as it reads, and SparseCores run in parallel. The results are those of [`preprocess`]
//! with `stats_only`, computed by the same counting and the same checks.
//!
//! What it does not cover it leaves to the caller, who reads the file whole instead: deflated or
//! Fortran-ordered members, ragged ids, weights, arrays the spec does not name, id dropping, a
//! stack the counting cannot settle (a column outside the stack, a COO buffer too small), an id at
//! or past its table's vocabulary (the reference path accepts those that land in the padded rows),
//! and any malformed input, whose error the reference path then reports with its usual message.
//!
//! [`preprocess`]: super::preprocess

use std::fs::File;
use std::path::Path;

use rayon::prelude::*;

use super::group::{self, ScGroups, StackGroups};
use super::npy::{read_header, ElementKind};
use super::spec::PreprocessSpec;
use super::stacking::{build_stacks, Stack};
use super::tally::{with_tally, ColumnMap};
use super::{Options, PreprocessError, PreprocessOutput, MINIBATCH_BUCKETS};

/// Ids read at a time by one SparseCore (64 KiB: the block stays in L2 beside the two-bit table while
/// it is counted, and a fresh thread's buffer costs 16 page faults, not 64).
const BLOCK_IDS: usize = 1 << 14;

/// A dense int32 [rows, valency] array stored uncompressed in the zip.
struct Member {
    /// File offset of the first id.
    data: u64,
    rows: u64,
    valency: u64,
    /// CRC-32 state over the member's bytes before the ids (the NPY header).
    header_crc: crc32fast::Hasher,
    /// The member's CRC-32 from the zip directory.
    crc: u32,
    /// The vocabulary of the feature's table: an id at or past it is the reference path's error.
    vocab: u64,
}

/// One task: count one source SparseCore of a stack, or check rows no SparseCore reads.
enum Work {
    Count { stack: usize, d: u64, s: u64 },
    Rest { feature: usize, from: u64 },
}

/// What a task read: per feature, the first row and CRC-32 of its slice; the counts if it counted.
struct Done {
    pieces: Vec<(usize, u64, u64, crc32fast::Hasher)>,
    counts: Option<(Vec<u32>, Vec<u32>)>,
}

/// [`super::preprocess`] with `stats_only` on the NPZ file at `path`, reading it in blocks; None when
/// the input is outside what streaming covers (see the module's documentation), and the caller
/// should read the file whole and run the reference path.
pub fn preprocess_stats_npz(spec: &PreprocessSpec, path: &Path) -> Option<Result<PreprocessOutput, PreprocessError>> {
    if spec.validate().is_err() || spec.allow_id_dropping {
        return None;
    }
    let file = File::open(path).ok()?;
    let members = open_members(spec, &file)?;
    let stacks: Vec<Stack> = build_stacks(spec)
        .into_iter()
        .filter(|s| !s.features.is_empty())
        .collect();
    // Geometry the reference path refuses (its errors are left to it).
    let (ldev, nsc) = (spec.local_device_count as u64, spec.num_sc_per_device as u64);
    let mut batches = Vec::with_capacity(stacks.len());
    for stack in &stacks {
        batches.push(group::batch_per_sc(spec, stack, |f| members[f].rows).ok()?);
        let per_sc: u64 = stack
            .features
            .iter()
            .map(|f| members[f.feature].rows / (ldev * nsc) * members[f.feature].valency)
            .sum();
        group::check_sc_ids(stack, per_sc).ok()?;
    }
    let counted = |buckets_on: bool| -> Option<Result<Vec<StackGroups>, PreprocessError>> {
        let counts = count_all(spec, &stacks, &members, &file, buckets_on)?;
        let mut counts = counts.into_iter();
        let buckets = if buckets_on { MINIBATCH_BUCKETS } else { 1 };
        let mut grouped = Vec::with_capacity(stacks.len());
        for (stack, &batch_per_sc) in stacks.iter().zip(&batches) {
            let mut out = StackGroups::empty(batch_per_sc as u32, buckets, true);
            for d in 0..ldev {
                let mut scs = Vec::with_capacity(nsc as usize);
                for s in 0..nsc {
                    let (ids, unique) = counts.next()?;
                    let sc = ScGroups::counted(ids, unique, buckets);
                    if let Err(e) = group::check_sc(spec, stack, d, s, &sc, false, &mut out) {
                        return Some(Err(e));
                    }
                    scs.push(sc);
                }
                out.devices.push(scs);
            }
            grouped.push(out);
        }
        Some(Ok(grouped))
    };
    let mut grouped = match counted(false)? {
        Ok(g) => g,
        Err(e) => return Some(Err(e)),
    };
    let mut split = 0u64;
    if spec.enable_minibatching && grouped.iter().any(|g| g.exceeds_limits) {
        grouped = match counted(true)? {
            Ok(g) => g,
            Err(e) => return Some(Err(e)),
        };
        split = grouped.iter().fold(0, |acc, g| acc | g.split);
    }
    let mut out = PreprocessOutput::default();
    for (stack, g) in stacks.iter().zip(grouped) {
        match group::counts_fit_buffer(spec, stack, &g) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => return Some(Err(e)),
        }
        match group::fill_stack(spec, stack, g, split, Options { stats_only: true }) {
            Ok(o) => out.stacks.push((stack.name.clone(), o)),
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(out))
}

/// The spec's features as stored dense int32 members, in spec order; None unless the zip holds
/// exactly those arrays, each stored, row-major, 2-D, ending where its data does, with the rows the
/// spec declares.
fn open_members(spec: &PreprocessSpec, file: &File) -> Option<Vec<Member>> {
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file)).ok()?;
    let arrays = zip
        .file_names()
        .filter(|n| npyz::npz::array_name_from_file_name(n).is_some())
        .count();
    if arrays != spec.features.len() {
        return None;
    }
    let mut members = Vec::with_capacity(spec.features.len());
    for f in &spec.features {
        if f.name.contains('.') {
            return None;
        }
        let m = zip.by_name(&npyz::npz::file_name_from_array_name(&f.name)).ok()?;
        if m.compression() != zip::CompressionMethod::Stored || m.compressed_size() != m.size() {
            return None;
        }
        let (start, size, crc) = (m.data_start(), m.size(), m.crc32());
        drop(m);
        let mut at = ReadAt {
            file,
            pos: start,
            end: start.checked_add(size)?,
        };
        let layout = read_header(&mut at, size).ok()?;
        let h = &layout.header;
        let data_bytes = (layout.count as u64).checked_mul(4)?;
        if layout.kind != ElementKind::I32
            || h.fortran
            || h.shape.len() != 2
            || h.data_offset as u64 + data_bytes != size
            || Some(&h.shape[0]) != f.input_shape.first()
            || Some(&h.shape[1]) != f.input_shape.get(1)
        {
            return None;
        }
        let mut head = vec![0u8; h.data_offset];
        read_exact_at(file, &mut head, start)?;
        let mut header_crc = crc32fast::Hasher::new();
        header_crc.update(&head);
        members.push(Member {
            data: start + h.data_offset as u64,
            rows: h.shape[0],
            valency: h.shape[1],
            header_crc,
            crc,
            vocab: spec.tables.iter().find(|t| t.name == f.table)?.vocabulary_size,
        });
    }
    Some(members)
}

/// Counts every source SparseCore of every stack (in stack, device, SparseCore order) and checks
/// the rest of the ids; None if an id is negative, a column falls outside its stack, a read fails
/// or a member's checksum is wrong.
fn count_all(
    spec: &PreprocessSpec,
    stacks: &[Stack],
    members: &[Member],
    file: &File,
    buckets_on: bool,
) -> Option<Vec<(Vec<u32>, Vec<u32>)>> {
    let (ldev, nsc) = (spec.local_device_count as u64, spec.num_sc_per_device as u64);
    let num_scs = spec.num_scs();
    let buckets = if buckets_on { MINIBATCH_BUCKETS } else { 1 };
    let mut work = Vec::new();
    for stack in 0..stacks.len() {
        for d in 0..ldev {
            for s in 0..nsc {
                work.push(Work::Count { stack, d, s });
            }
        }
    }
    for (feature, m) in members.iter().enumerate() {
        let from = m.rows / (ldev * nsc) * ldev * nsc;
        if from < m.rows {
            work.push(Work::Rest { feature, from });
        }
    }
    let done: Vec<Option<Done>> = work
        .par_iter()
        .map(|w| match *w {
            Work::Count { stack, d, s } => {
                let stack = &stacks[stack];
                let ids: u64 = stack
                    .features
                    .iter()
                    .map(|f| members[f.feature].rows / (ldev * nsc) * members[f.feature].valency)
                    .sum();
                // Samples longer than a block come in parts, which only the hash table takes.
                let parts = stack
                    .features
                    .iter()
                    .any(|f| members[f.feature].valency as usize > BLOCK_IDS);
                with_tally(stack.stack_vocab_size, ids as usize, num_scs, buckets, parts, |t| {
                    let mut pieces = Vec::with_capacity(stack.features.len());
                    for f in &stack.features {
                        let m = &members[f.feature];
                        let n = m.rows / (ldev * nsc);
                        let first = (d * nsc + s) * n;
                        let map = ColumnMap {
                            shift: f.col_shift as u32,
                            offset: f.col_offset as u32,
                        };
                        let valency = m.valency as usize;
                        // Blocks hold whole samples unless one is longer than a block; then `left`
                        // carries a sample over.
                        let mut left = 0usize;
                        let crc = read_rows(file, m, first, n, |mut ids| {
                            if !parts {
                                return t.add_rows(ids, valency, map);
                            }
                            while !ids.is_empty() {
                                if left == 0 {
                                    t.next_row();
                                    left = valency;
                                }
                                let k = left.min(ids.len());
                                if !t.add(&ids[..k], map) {
                                    return false;
                                }
                                ids = &ids[k..];
                                left -= k;
                            }
                            true
                        })?;
                        pieces.push((f.feature, first, n, crc));
                    }
                    Some(Done {
                        pieces,
                        counts: Some((std::mem::take(&mut t.ids), std::mem::take(&mut t.unique))),
                    })
                })
            }
            Work::Rest { feature, from } => {
                let m = &members[feature];
                let crc = read_rows(file, m, from, m.rows - from, |_| true)?;
                Some(Done {
                    pieces: vec![(feature, from, m.rows - from, crc)],
                    counts: None,
                })
            }
        })
        .collect();
    let done: Vec<Done> = done.into_iter().collect::<Option<_>>()?;
    // Each member's checksum: its header, then its row slices in row order.
    let mut pieces: Vec<&(usize, u64, u64, crc32fast::Hasher)> = done.iter().flat_map(|d| &d.pieces).collect();
    pieces.sort_by_key(|p| (p.0, p.1));
    for (feature, m) in members.iter().enumerate() {
        let mut crc = m.header_crc.clone();
        let mut next_row = 0;
        for &&(_, first, rows, ref piece) in pieces.iter().filter(|p| p.0 == feature) {
            if first != next_row {
                return None;
            }
            crc.combine(piece);
            next_row += rows;
        }
        if next_row != m.rows || crc.finalize() != m.crc {
            return None;
        }
    }
    Some(done.into_iter().filter_map(|d| d.counts).collect())
}

thread_local! {
    /// A thread's block buffer, reused from task to task.
    static BLOCK: std::cell::RefCell<Vec<i32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Reads `n` rows of `m` from row `first` in blocks, handing each block's ids to `each` (false
/// stops); returns the CRC-32 of the bytes read, or None on a failed read, a negative id, or a stop.
fn read_rows(
    file: &File,
    m: &Member,
    first: u64,
    n: u64,
    mut each: impl FnMut(&[i32]) -> bool,
) -> Option<crc32fast::Hasher> {
    let mut run = |block: &mut Vec<i32>| -> Option<crc32fast::Hasher> {
        let mut crc = crc32fast::Hasher::new();
        let total = n.checked_mul(m.valency)?;
        let mut pos = m.data.checked_add(first.checked_mul(m.valency)?.checked_mul(4)?)?;
        let mut left = total;
        // Whole rows per block when a row fits one.
        let v = m.valency as usize;
        let step = if v > 0 && v <= BLOCK_IDS {
            BLOCK_IDS / v * v
        } else {
            BLOCK_IDS
        };
        block.resize(step.min(total as usize), 0);
        while left > 0 {
            let k = (left as usize).min(step);
            let ids = &mut block[..k];
            read_exact_at(file, as_bytes_mut(ids), pos)?;
            crc.update(as_bytes_mut(ids));
            if cfg!(target_endian = "big") {
                for x in ids.iter_mut() {
                    *x = i32::from_le(*x);
                }
            }
            // The sign bits ORed and the largest id (vectorised): a negative id or one past the
            // vocabulary is the reference path's to judge (an error, or a padded row).
            let (sign, top) = ids.iter().fold((0i32, 0i32), |(a, b), &x| (a | x, b.max(x)));
            if sign < 0 || top as u64 >= m.vocab || !each(ids) {
                return None;
            }
            pos += k as u64 * 4;
            left -= k as u64;
        }
        Some(crc)
    };
    BLOCK.with(|b| match b.try_borrow_mut() {
        Ok(mut block) => run(&mut block),
        Err(_) => run(&mut Vec::new()),
    })
}

/// The bytes of `ids`, to read into them in place.
fn as_bytes_mut(ids: &mut [i32]) -> &mut [u8] {
    // SAFETY: i32 has no padding and every bit pattern is valid; the view covers exactly the slice's
    // memory and borrows it mutably for its lifetime.
    unsafe { std::slice::from_raw_parts_mut(ids.as_mut_ptr() as *mut u8, std::mem::size_of_val(ids)) }
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], pos: u64) -> Option<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, pos).ok()
}

#[cfg(not(unix))]
fn read_exact_at(_: &File, _: &mut [u8], _: u64) -> Option<()> {
    None
}

/// A `Read` over `file[pos..end]` by positional reads (the file's cursor is left alone).
struct ReadAt<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl std::io::Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = (buf.len() as u64).min(self.end.saturating_sub(self.pos)) as usize;
        if k == 0 {
            return Ok(0);
        }
        read_exact_at(self.file, &mut buf[..k], self.pos).ok_or(std::io::ErrorKind::UnexpectedEof)?;
        self.pos += k as u64;
        Ok(k)
    }
}
