//! Collectives as a module states them: the kind, the replica groups (explicit `{{0,1},{2,3}}` or iota
//! `[2,2]<=[4]`, `[2,2]<=[2,2]T(1,0)`), `channel_id`, `dimensions`, `source_target_pairs` and `to_apply`.
//!
//! The parser checks every collective's attributes ([`validate`]) so a malformed group is a parse error naming
//! the instruction's line; costing reads them again with [`Collective::of`].

use serde::Serialize;

use super::ir::Instruction;

/// Most devices a replica-group list may name (a bound checked before anything is allocated).
pub const MAX_DEVICES: u64 = 1 << 20;

/// The five collective kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CollectiveKind {
    /// Sum (or any reduction) over the group; every member gets the result.
    AllReduce,
    /// Every member gets the concatenation of every member's operand.
    AllGather,
    /// Reduction over the group, each member keeping one slice of the result.
    ReduceScatter,
    /// Every member sends a slice of its operand to each member.
    AllToAll,
    /// Each source sends its operand to one target.
    CollectivePermute,
}

impl CollectiveKind {
    /// The kind of an opcode, and whether it is the `-start` of an async pair. `-done` halves and other opcodes
    /// are `None`.
    pub fn of_opcode(opcode: &str) -> Option<(CollectiveKind, bool)> {
        let (base, start) = match opcode.strip_suffix("-start") {
            Some(b) => (b, true),
            None => (opcode, false),
        };
        let kind = match base {
            "all-reduce" => CollectiveKind::AllReduce,
            "all-gather" => CollectiveKind::AllGather,
            "reduce-scatter" => CollectiveKind::ReduceScatter,
            "all-to-all" => CollectiveKind::AllToAll,
            "collective-permute" => CollectiveKind::CollectivePermute,
            _ => return None,
        };
        Some((kind, start))
    }

    /// The `-done` half of an async collective (it waits; the transfer is its `-start`'s).
    pub fn is_done(opcode: &str) -> bool {
        opcode
            .strip_suffix("-done")
            .is_some_and(|b| CollectiveKind::of_opcode(b).is_some())
    }

    /// Whether an opcode's result takes over its operands' buffers when they are not read afterwards: an
    /// all-reduce (sync or `-start`) reduces in place, and a `-done` hands on its `-start`'s buffer. (The
    /// compiler's per-device `memory_analysis()` of the sharded programs in `testdata/shard/models/` counts
    /// one buffer for the gradient all-reduce's operands and results.)
    pub fn reuses_operand_buffers(opcode: &str) -> bool {
        matches!(opcode, "all-reduce" | "all-reduce-start") || CollectiveKind::is_done(opcode)
    }

    /// The opcode's text.
    pub fn name(self) -> &'static str {
        match self {
            CollectiveKind::AllReduce => "all-reduce",
            CollectiveKind::AllGather => "all-gather",
            CollectiveKind::ReduceScatter => "reduce-scatter",
            CollectiveKind::AllToAll => "all-to-all",
            CollectiveKind::CollectivePermute => "collective-permute",
        }
    }
}

/// Who takes part: groups of device ids, or source -> target pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Participants {
    /// Replica groups; empty means one group of every device.
    Groups(Vec<Vec<u32>>),
    /// `source_target_pairs`.
    Pairs(Vec<(u32, u32)>),
}

/// One collective read from an instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Collective {
    /// Its kind.
    pub kind: CollectiveKind,
    /// Whether it is the `-start` of an async pair.
    pub is_async: bool,
    /// Groups or pairs.
    pub participants: Participants,
    /// `channel_id`, when given.
    pub channel_id: Option<u64>,
    /// `dimensions` (the gathered, scattered or split dimension), when given.
    pub dimensions: Vec<i64>,
    /// The reduction computation (`to_apply`), when given.
    pub to_apply: Option<String>,
}

impl Collective {
    /// The collective `ins` states, `None` when it is not one; `Err` names what is malformed.
    pub fn of(ins: &Instruction) -> Result<Option<Collective>, String> {
        let Some((kind, is_async)) = CollectiveKind::of_opcode(&ins.opcode) else {
            return Ok(None);
        };
        let participants = if kind == CollectiveKind::CollectivePermute {
            let text = ins.attr("source_target_pairs").unwrap_or("{}");
            Participants::Pairs(parse_pairs(text).map_err(|e| format!("source_target_pairs={text}: {e}"))?)
        } else {
            let text = ins.attr("replica_groups").unwrap_or("{}");
            Participants::Groups(parse_groups(text).map_err(|e| format!("replica_groups={text}: {e}"))?)
        };
        let channel_id = match ins.attr("channel_id") {
            Some(t) => Some(
                t.trim()
                    .parse::<u64>()
                    .map_err(|_| format!("channel_id={t}: expected a non-negative integer"))?,
            ),
            None => None,
        };
        let dimensions = match ins.attr("dimensions") {
            Some(t) => ins
                .int_list("dimensions")
                .or_else(|| t.trim().parse::<i64>().ok().map(|d| vec![d]))
                .ok_or_else(|| format!("dimensions={t}: expected a dimension number or {{d,...}}"))?,
            None => Vec::new(),
        };
        Ok(Some(Collective {
            kind,
            is_async,
            participants,
            channel_id,
            dimensions,
            to_apply: ins
                .attr("to_apply")
                .map(|s| s.trim().trim_start_matches('%').to_string()),
        }))
    }

    /// The groups with the empty list expanded to one group of `devices` devices; pairs give one group of
    /// every device they name.
    pub fn groups(&self, devices: u32) -> Vec<Vec<u32>> {
        match &self.participants {
            Participants::Groups(g) if g.is_empty() => vec![(0..devices).collect()],
            Participants::Groups(g) => g.clone(),
            Participants::Pairs(p) => {
                let mut ids: Vec<u32> = p.iter().flat_map(|&(s, t)| [s, t]).collect();
                ids.sort_unstable();
                ids.dedup();
                vec![ids]
            }
        }
    }

    /// The largest device id named.
    pub fn max_device(&self) -> Option<u32> {
        match &self.participants {
            Participants::Groups(g) => g.iter().flatten().copied().max(),
            Participants::Pairs(p) => p.iter().flat_map(|&(s, t)| [s, t]).max(),
        }
    }
}

/// Checks a collective's attributes (the parser calls it on every instruction).
pub fn validate(ins: &Instruction) -> Result<(), String> {
    Collective::of(ins).map(|_| ())
}

const GROUPS_VALID: &str = "valid: {} (every device), {{0,1},{2,3}} (explicit groups of distinct ids), \
                            [G,S]<=[d1,...] with an optional T(permutation) (iota: G groups of S, G x S = d1 x ...), \
                            or mesh['a'=2,'b'=4] {'b'} (groups along the named mesh axes)";

/// `mesh['a'=2,'b'=4] {'b'}` (after `mesh[`): devices row-major over the mesh axes (the last fastest); one
/// group per position of the axes not named in braces, holding every position of those named.
fn parse_mesh_groups(rest: &str) -> Result<Vec<Vec<u32>>, String> {
    let close = rest
        .find(']')
        .ok_or_else(|| format!("mesh[ without its `]` ({GROUPS_VALID})"))?;
    let mut axes: Vec<(String, u64)> = Vec::new();
    for a in rest[..close].split(',') {
        let (n, size) = a
            .split_once('=')
            .ok_or_else(|| format!("mesh axis `{}` without `=size` ({GROUPS_VALID})", a.trim()))?;
        let size = size
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|&s| s > 0)
            .ok_or_else(|| format!("mesh axis size `{}` ({GROUPS_VALID})", size.trim()))?;
        axes.push((n.trim().trim_matches('\'').to_string(), size));
    }
    let names = rest[close + 1..].trim();
    let names = names
        .strip_prefix('{')
        .and_then(|x| x.strip_suffix('}'))
        .ok_or_else(|| format!("expected {{'axis',...}} after the mesh ({GROUPS_VALID})"))?;
    let named: Vec<String> = names
        .split(',')
        .map(|x| x.trim().trim_matches('\'').to_string())
        .filter(|x| !x.is_empty())
        .collect();
    if let Some(bad) = named.iter().find(|n| !axes.iter().any(|(a, _)| a == *n)) {
        return Err(format!("axis '{bad}' is not in the mesh ({GROUPS_VALID})"));
    }
    let n = axes
        .iter()
        .try_fold(1u64, |p, (_, s)| p.checked_mul(*s).filter(|&v| v <= MAX_DEVICES))
        .ok_or_else(|| format!("more than {MAX_DEVICES} devices"))?;
    let dims: Vec<u64> = axes.iter().map(|a| a.1).collect();
    // Transpose so the named axes are fastest: then consecutive runs are the groups.
    let mut perm: Vec<u64> = (0..axes.len() as u64)
        .filter(|&i| !named.contains(&axes[i as usize].0))
        .collect();
    perm.extend((0..axes.len() as u64).filter(|&i| named.contains(&axes[i as usize].0)));
    let size: u64 = axes.iter().filter(|a| named.contains(&a.0)).map(|a| a.1).product();
    let ids = iota_transposed(&dims, &perm);
    debug_assert_eq!(ids.len() as u64, n);
    Ok(ids.chunks(size.max(1) as usize).map(|c| c.to_vec()).collect())
}

/// Reads `replica_groups` in its explicit or iota form.
pub fn parse_groups(text: &str) -> Result<Vec<Vec<u32>>, String> {
    let t = text.trim();
    let groups = if t.starts_with('[') {
        parse_iota(t)?
    } else if let Some(rest) = t.strip_prefix("mesh[") {
        parse_mesh_groups(rest)?
    } else {
        parse_nested(t).map_err(|e| format!("{e} ({GROUPS_VALID})"))?
    };
    check_distinct(&groups)?;
    if groups.iter().any(|g| g.is_empty()) {
        return Err(format!("an empty group ({GROUPS_VALID})"));
    }
    Ok(groups)
}

/// Reads `source_target_pairs={{0,1},{1,2}}`: each source and each target at most once.
pub fn parse_pairs(text: &str) -> Result<Vec<(u32, u32)>, String> {
    const VALID: &str = "valid: {{source,target},...} with each source and each target named once";
    let lists = parse_nested(text.trim()).map_err(|e| format!("{e} ({VALID})"))?;
    let mut pairs = Vec::with_capacity(lists.len());
    for l in lists {
        match l.as_slice() {
            [s, t] => pairs.push((*s, *t)),
            _ => return Err(format!("a pair of {} ids ({VALID})", l.len())),
        }
    }
    for (which, ids) in [
        ("source", pairs.iter().map(|p| p.0).collect::<Vec<_>>()),
        ("target", pairs.iter().map(|p| p.1).collect()),
    ] {
        let mut s = ids.clone();
        s.sort_unstable();
        if let Some(w) = s.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("{which} {} named twice ({VALID})", w[0]));
        }
    }
    Ok(pairs)
}

/// `{{0,1},{2,3}}` (or `{}`): lists of device ids.
fn parse_nested(t: &str) -> Result<Vec<Vec<u32>>, String> {
    let inner = t
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .ok_or("expected a braced list")?
        .trim();
    if inner.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut rest = inner;
    let mut total = 0u64;
    loop {
        let open = rest.strip_prefix('{').ok_or("expected `{` opening a group")?;
        let close = open.find('}').ok_or("a group without its closing `}`")?;
        let ids = &open[..close];
        let mut g = Vec::new();
        if !ids.trim().is_empty() {
            for x in ids.split(',') {
                let id: u32 = x
                    .trim()
                    .parse()
                    .map_err(|_| format!("`{}` is not a device id (a non-negative integer)", x.trim()))?;
                total += 1;
                if total > MAX_DEVICES || u64::from(id) >= MAX_DEVICES {
                    return Err(format!("more than {MAX_DEVICES} devices"));
                }
                g.push(id);
            }
        }
        out.push(g);
        rest = open[close + 1..].trim_start();
        if rest.is_empty() {
            return Ok(out);
        }
        rest = rest
            .strip_prefix(',')
            .ok_or("expected `,` between groups")?
            .trim_start();
    }
}

fn int_list(t: &str, what: &str) -> Result<Vec<u64>, String> {
    t.split(',')
        .map(|x| {
            x.trim().parse::<u64>().map_err(|_| {
                format!(
                    "`{}` in {what} is not a non-negative integer ({GROUPS_VALID})",
                    x.trim()
                )
            })
        })
        .collect()
}

/// `[G,S]<=[d1,...]T(p...)`: iota over d1 x ..., transposed by p, read as G groups of S.
fn parse_iota(t: &str) -> Result<Vec<Vec<u32>>, String> {
    let (shape, rest) = t
        .split_once("<=")
        .ok_or_else(|| format!("expected `<=` ({GROUPS_VALID})"))?;
    let shape = shape.trim();
    let gs = int_list(
        shape
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']'))
            .ok_or_else(|| format!("expected [G,S] ({GROUPS_VALID})"))?,
        "[G,S]",
    )?;
    let [g, s] = gs[..] else {
        return Err(format!("[G,S] has {} numbers, not 2 ({GROUPS_VALID})", gs.len()));
    };
    let rest = rest.trim();
    let close = rest
        .find(']')
        .ok_or_else(|| format!("expected [d1,...] ({GROUPS_VALID})"))?;
    let dims_text = rest
        .strip_prefix('[')
        .map(|r| &r[..close - 1])
        .ok_or_else(|| format!("expected [d1,...] after `<=` ({GROUPS_VALID})"))?;
    let dims = int_list(dims_text, "the dims")?;
    let perm_text = rest[close + 1..].trim();
    let perm: Vec<u64> = if perm_text.is_empty() {
        (0..dims.len() as u64).collect()
    } else {
        let p = perm_text
            .strip_prefix("T(")
            .and_then(|x| x.strip_suffix(')'))
            .ok_or_else(|| format!("`{perm_text}` after the dims: expected T(permutation) ({GROUPS_VALID})"))?;
        int_list(p, "T(...)")?
    };
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    if sorted != (0..dims.len() as u64).collect::<Vec<_>>() {
        return Err(format!(
            "T{perm:?} is not a permutation of the {} dims ({GROUPS_VALID})",
            dims.len()
        ));
    }
    let n = dims
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d).filter(|&p| p <= MAX_DEVICES));
    let n = n.ok_or_else(|| format!("more than {MAX_DEVICES} devices"))?;
    if g.checked_mul(s) != Some(n) || n == 0 {
        return Err(format!(
            "[{g},{s}] holds {} ids but the dims hold {n} ({GROUPS_VALID})",
            g.saturating_mul(s)
        ));
    }
    let ids = iota_transposed(&dims, &perm);
    Ok(ids.chunks(s as usize).map(|c| c.to_vec()).collect())
}

/// The ids 0..prod(dims) laid out over `dims` (row-major), transposed by `perm`, read row-major.
pub fn iota_transposed(dims: &[u64], perm: &[u64]) -> Vec<u32> {
    let tdims: Vec<u64> = perm.iter().map(|&p| dims[p as usize]).collect();
    let n: u64 = dims.iter().product();
    // Row-major strides of the original dims.
    let mut strides = vec![1u64; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * dims[i + 1];
    }
    let mut out = Vec::with_capacity(n as usize);
    let mut idx = vec![0u64; dims.len()];
    for _ in 0..n {
        let id: u64 = idx.iter().zip(perm).map(|(&i, &p)| i * strides[p as usize]).sum();
        out.push(id as u32);
        for a in (0..idx.len()).rev() {
            idx[a] += 1;
            if idx[a] < tdims[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    out
}

fn check_distinct(groups: &[Vec<u32>]) -> Result<(), String> {
    let mut all: Vec<u32> = groups.iter().flatten().copied().collect();
    all.sort_unstable();
    match all.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(format!("device {} is in more than one place ({GROUPS_VALID})", w[0])),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iota_groups_by_hand() {
        // [2,2]<=[4]: ids 0..4 row-major in groups of 2.
        assert_eq!(parse_groups("[2,2]<=[4]").unwrap(), vec![vec![0, 1], vec![2, 3]]);
        // [2,2]<=[2,2]T(1,0): the 2x2 grid [[0,1],[2,3]] transposed is [[0,2],[1,3]].
        assert_eq!(
            parse_groups("[2,2]<=[2,2]T(1,0)").unwrap(),
            vec![vec![0, 2], vec![1, 3]]
        );
        // [4,2]<=[2,4]T(1,0): grid [[0,1,2,3],[4,5,6,7]] transposed: 0,4,1,5,2,6,3,7.
        assert_eq!(
            parse_groups("[4,2]<=[2,4]T(1,0)").unwrap(),
            vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
        );
        // [2,4]<=[2,2,2]T(2,1,0): index (a,b,c) -> 4a+2b+c, read with c slowest: 0,4,2,6,1,5,3,7.
        assert_eq!(
            parse_groups("[2,4]<=[2,2,2]T(2,1,0)").unwrap(),
            vec![vec![0, 4, 2, 6], vec![1, 5, 3, 7]]
        );
        assert_eq!(parse_groups("{{0,1},{2,3}}").unwrap(), vec![vec![0, 1], vec![2, 3]]);
        assert!(parse_groups("{}").unwrap().is_empty());
        // mesh['a'=2,'b'=2] {'a'}: ids (a,b) -> 2a+b; groups along a: {0,2}, {1,3}.
        assert_eq!(
            parse_groups("mesh['a'=2,'b'=2] {'a'}").unwrap(),
            vec![vec![0, 2], vec![1, 3]]
        );
        assert_eq!(
            parse_groups("mesh['axis_0'=4] {'axis_0'}").unwrap(),
            vec![vec![0, 1, 2, 3]]
        );
    }

    #[test]
    fn malformed_groups_say_what_is_valid() {
        for bad in [
            "{{0,1},{1,2}}",
            "[2,3]<=[4]",
            "[2,2]<=[2,2]T(0,0)",
            "{{0,x}}",
            "{{0,1}",
            "[2,2]<=[4]Q",
        ] {
            let e = parse_groups(bad).unwrap_err();
            assert!(e.contains("valid:"), "{bad}: {e}");
        }
        assert!(parse_pairs("{{0,1},{2,1}}")
            .unwrap_err()
            .contains("target 1 named twice"));
        assert!(parse_pairs("{{0,1,2}}").is_err());
        assert!(parse_groups("[1048577,1]<=[1048577]")
            .unwrap_err()
            .contains("more than"));
    }
}
