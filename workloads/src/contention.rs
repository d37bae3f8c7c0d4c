//! Where two stages of a run share a bandwidth at once: per shared resource (HBM, the ICI link
//! groups) and pair of stages, the time both moved bytes there together inside the measured window,
//! per measured step. Read off the spans' tags; the engine shares a bandwidth fairly between the
//! transfers on it, so this is time each ran slower than alone.

use std::collections::BTreeMap;

use sim_core::recorder::{Recorder, Span};
use sim_core::tag::{Stage, Unit};
use sim_core::time::merged_intervals;

/// A bandwidth stages can share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Shared {
    /// The chip's HBM.
    Hbm,
    /// The chip's ICI link groups (each dimension and direction its own; the longest time on any one).
    IciLinks,
}

impl Shared {
    /// Words for a person.
    pub fn describe(self) -> &'static str {
        match self {
            Shared::Hbm => "HBM",
            Shared::IciLinks => "ICI links (same dimension and direction)",
        }
    }
}

/// Time two stages shared a resource, ps per measured step, keyed by (resource, first stage, second
/// stage); on the ICI links, the longest on any one link group.
pub type Overlaps = BTreeMap<(Shared, Stage, Stage), u64>;

/// Time intervals, ps: (start, end).
type Intervals = Vec<(u64, u64)>;
/// A unit and a stage on it.
type UnitStage = (Unit, Stage);

/// Length of the intersection of two sorted, disjoint interval lists.
fn intersection(a: &[(u64, u64)], b: &[(u64, u64)]) -> u64 {
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let (lo, hi) = (a[i].0.max(b[j].0), a[i].1.min(b[j].1));
        total += hi.saturating_sub(lo);
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

/// The measured window: the span tagged [`Unit::MeasuredWindow`].
fn window(rec: &Recorder) -> Option<(u64, u64)> {
    rec.spans
        .iter()
        .find(|s| s.tag.is_some_and(|t| t.unit == Unit::MeasuredWindow))
        .map(|s| (s.start.0, s.end.0))
}

/// Every pair of stages sharing HBM or an ICI link group at once in `rec`'s measured window, ps per
/// step over `steps` measured steps.
pub fn overlaps(rec: &Recorder, steps: u64) -> Overlaps {
    let Some((w0, w1)) = window(rec) else {
        return Overlaps::new();
    };
    // Per unit and stage, the clipped intervals it moved bytes in.
    let mut per: BTreeMap<(Unit, Stage), Vec<(u64, u64)>> = BTreeMap::new();
    let inside = |s: &Span| (s.start.0.max(w0), s.end.0.min(w1));
    for s in &rec.spans {
        let Some(t) = s.tag else { continue };
        let (Some(stage), true) = (t.stage, matches!(t.unit, Unit::Hbm | Unit::IciLink(_))) else {
            continue;
        };
        let (a, b) = inside(s);
        if b > a {
            per.entry((t.unit, stage)).or_default().push((a, b));
        }
    }
    let per: Vec<(UnitStage, Intervals)> = per.into_iter().map(|(k, v)| (k, merged_intervals(v))).collect();
    let mut out = Overlaps::new();
    for (x, ((ua, sa), a)) in per.iter().enumerate() {
        for ((ub, sb), b) in &per[x + 1..] {
            if ua != ub {
                continue;
            }
            let shared = if *ua == Unit::Hbm {
                Shared::Hbm
            } else {
                Shared::IciLinks
            };
            let both = intersection(a, b) / steps.max(1);
            if both > 0 {
                let e = out.entry((shared, *sa, *sb)).or_default();
                *e = (*e).max(both);
            }
        }
    }
    out
}

/// The pair whose shared time grew most from `base` to `variant`, with the growth, ps per step.
pub fn grown(base: &Overlaps, variant: &Overlaps) -> Option<((Shared, Stage, Stage), u64)> {
    variant
        .iter()
        .map(|(k, &v)| (*k, v.saturating_sub(base.get(k).copied().unwrap_or(0))))
        .filter(|&(_, d)| d > 0)
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim_core::recorder::Track;
    use sim_core::tag::SpanTag;
    use sim_core::time::SimTime;

    fn span(unit: Unit, stage: Option<Stage>, (a, b): (u64, u64)) -> Span {
        Span {
            track: Track {
                process: "chip 0".into(),
                thread: "any".into(),
            },
            name: String::new(),
            category: String::new(),
            start: SimTime(a),
            end: SimTime(b),
            args: vec![],
            tag: Some(SpanTag {
                unit,
                stage,
                step: Some(0),
                kernel: None,
            }),
        }
    }

    #[test]
    fn overlap_counts_time_both_stages_use_one_link_group_inside_the_window() {
        let mut r = Recorder::new();
        r.span(span(Unit::MeasuredWindow, None, (100, 1100)));
        // All-reduce on x+ 100-600; an all-to-all on x+ 400-900 (400-600 together: 200), on y+ 0-2000 (another group).
        r.span(span(Unit::IciLink(0), Some(Stage::AllReduce), (100, 600)));
        r.span(span(Unit::IciLink(0), Some(Stage::AllToAll), (400, 900)));
        r.span(span(Unit::IciLink(2), Some(Stage::AllToAll), (0, 2000)));
        // On y+ the all-reduce 500-550 with it: 50, less than x+'s, so x+'s counts.
        r.span(span(Unit::IciLink(2), Some(Stage::AllReduce), (500, 550)));
        // HBM: a kernel 0-300 and a SparseCore pass 200-500; the window clips the kernel to 100-300: 100 together.
        r.span(span(Unit::Hbm, Some(Stage::TcForward), (0, 300)));
        r.span(span(Unit::Hbm, Some(Stage::ScForward), (200, 500)));
        // Two measured steps: per step, half.
        let o = overlaps(&r, 2);
        assert_eq!(
            o.get(&(Shared::IciLinks, Stage::AllToAll, Stage::AllReduce)),
            Some(&100)
        );
        assert_eq!(o.get(&(Shared::Hbm, Stage::ScForward, Stage::TcForward)), Some(&50));
        assert_eq!(o.len(), 2);
        let mut more = o.clone();
        *more
            .get_mut(&(Shared::IciLinks, Stage::AllToAll, Stage::AllReduce))
            .unwrap() += 40;
        assert_eq!(
            grown(&o, &more),
            Some(((Shared::IciLinks, Stage::AllToAll, Stage::AllReduce), 40))
        );
        assert_eq!(grown(&o, &o), None);
    }
}
