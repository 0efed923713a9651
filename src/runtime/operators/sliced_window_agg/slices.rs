//! The slices of one group, and how a window is assembled from them.
//!
//! Slice `i` covers `[offset + i * slide, offset + (i + 1) * slide)`; window `e` (its end slice
//! index, exclusive) ends at `offset + e * slide`. A HOP window `e` is the `n = size / slide`
//! slices `[e - n, e)`; a CUMULATE window `e` is the slices from the start of its block (the
//! tumbling window of `size` that holds slice `e - 1`) to `e`. Blocks are `n` slices aligned
//! like the windows, so a HOP window is a suffix of one block and a prefix of the next, and a
//! CUMULATE window is a prefix of one block.
//!
//! Windows fire in order of `e`, so each group keeps, besides its slices:
//! - the prefix: the merge of its slices in `[block start, e)` for the block of the last window
//!   asked for, extended by one slice per window and updated by a row for a slice inside it;
//! - for HOP, suffix merges of the older block (each slice's merge with the later slices of
//!   its block), computed once per block and recomputed from the highest slice a row changed.
//!
//! So a window costs O(1) merges per group amortized, however many slices it spans. A HOP
//! over aggregates that can be subtracted exactly (COUNT, and SUM and AVG of integers and
//! decimals) instead keeps one running merge per group: a slice is added as it enters a window
//! and subtracted as it is freed, with no suffix merges.

use std::collections::VecDeque;

use crate::plan::window::WindowKind;

/// One aggregate's accumulator, of one slice or merged over slices.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Acc {
    /// COUNT.
    Count(i64),
    /// SUM/AVG over integers and decimals: the unscaled sum (wrapping past 128 bits, beyond
    /// any DECIMAL(38) sum of real data) and the count of non-NULL values.
    SumInt(i128, i64),
    /// SUM/AVG over floats: the sum and the count of non-NULL values.
    SumFloat(f64, i64),
    /// MIN: the memcomparable encoding of the smallest value (byte order is value order).
    Min(Option<Vec<u8>>),
    /// MAX: likewise, the largest.
    Max(Option<Vec<u8>>),
}

/// The accumulators of a slice or a window: its row count (inserts minus retractions) and
/// one [`Acc`] per aggregate.
#[derive(Debug, PartialEq)]
pub(super) struct Accs {
    pub rows: i64,
    pub accs: Vec<Acc>,
}

impl Clone for Accs {
    fn clone(&self) -> Self {
        Self { rows: self.rows, accs: self.accs.clone() }
    }

    /// Reuses `self`'s vector: a window is copied from its prefix once per group and window.
    fn clone_from(&mut self, source: &Self) {
        self.rows = source.rows;
        self.accs.clone_from(&source.accs);
    }
}

impl Accs {
    /// Whether [`Accs::subtract`] undoes [`Accs::merge`] exactly: COUNT and integer sums only.
    pub fn subtracts(&self) -> bool {
        self.accs.iter().all(|a| matches!(a, Acc::Count(_) | Acc::SumInt(..)))
    }

    /// Takes `other`'s rows out of `self` (both of the same aggregates, which
    /// [`Accs::subtracts`]).
    pub fn subtract(&mut self, other: &Accs) {
        self.rows -= other.rows;
        for (a, b) in self.accs.iter_mut().zip(&other.accs) {
            match (a, b) {
                (Acc::Count(x), Acc::Count(y)) => *x -= y,
                (Acc::SumInt(s, c), Acc::SumInt(t, d)) => {
                    *s = s.wrapping_sub(*t);
                    *c -= d;
                }
                _ => {}
            }
        }
    }

    /// Adds `other`'s rows into `self` (both of the same aggregates).
    pub fn merge(&mut self, other: &Accs) {
        self.rows += other.rows;
        for (a, b) in self.accs.iter_mut().zip(&other.accs) {
            match (a, b) {
                (Acc::Count(x), Acc::Count(y)) => *x += y,
                (Acc::SumInt(s, c), Acc::SumInt(t, d)) => {
                    *s = s.wrapping_add(*t);
                    *c += d;
                }
                (Acc::SumFloat(s, c), Acc::SumFloat(t, d)) => {
                    *s += t;
                    *c += d;
                }
                (Acc::Min(x), Acc::Min(Some(y))) if x.as_ref().is_none_or(|x| y < x) => *x = Some(y.clone()),
                (Acc::Max(x), Acc::Max(Some(y))) if x.as_ref().is_none_or(|x| y > x) => *x = Some(y.clone()),
                _ => {}
            }
        }
    }
}

/// Slice and window arithmetic of one HOP or CUMULATE window spec.
#[derive(Debug, Clone, Copy)]
pub(super) struct Geometry {
    pub kind: WindowKind,
    /// Slices per window (HOP) or per block (CUMULATE): size / slide.
    pub n: i64,
    /// Slice length, ms.
    pub slide_ms: i64,
    /// Alignment offset, ms.
    pub offset_ms: i64,
    /// HOP whose accumulators subtract exactly ([`Accs::subtract`]): windows slide by a
    /// running merge.
    pub subtract: bool,
}

impl Geometry {
    /// The block of slice `i`.
    pub fn block(&self, i: i64) -> i64 {
        i.div_euclid(self.n)
    }

    /// The first slice of window `e`.
    pub fn first_slice(&self, e: i64) -> i64 {
        match self.kind {
            WindowKind::Hop => e - self.n,
            _ => self.block(e - 1) * self.n,
        }
    }

    /// The start of slice (or window end) index `i`, ms.
    pub fn ms(&self, i: i64) -> i64 {
        self.offset_ms + i * self.slide_ms
    }

    /// The index of the slice that ends at `end_ms`.
    pub fn slice_ending_at(&self, end_ms: i64) -> i64 {
        (end_ms - self.offset_ms).div_euclid(self.slide_ms) - 1
    }

    /// The first window that has not fired at watermark `wm` (window `e` fires once the
    /// watermark reaches its window_time, `end - 1 ms`).
    pub fn next_window(&self, wm: i64) -> i64 {
        let fired = (wm as i128 + 1 - self.offset_ms as i128).div_euclid(self.slide_ms as i128);
        (fired + 1).clamp(i64::MIN as i128 / 2, i64::MAX as i128 / 2) as i64
    }
}

/// One (group, slice) accumulator.
#[derive(Debug)]
pub(super) struct Slice {
    /// The slice index.
    pub idx: i64,
    pub accs: Accs,
    /// HOP: this slice merged with the later slices of its block (valid when not stale).
    suffix: Option<Accs>,
    /// Whether it changed since the last barrier.
    pub dirty: bool,
}

/// The merge of a group's slices in `[block * n, upto)`.
#[derive(Debug)]
struct Prefix {
    block: i64,
    upto: i64,
    /// Where the first slice at or after `upto` is in the deque, kept up to date as slices are
    /// inserted and freed, and checked before use (a binary search when it is off).
    pos: usize,
    accs: Accs,
}

/// The merge of a group's slices before `hi` (HOP with [`Geometry::subtract`]): those of the
/// last window asked for, as the slices before that window are freed.
#[derive(Debug)]
struct Running {
    hi: i64,
    /// Where the first slice at or after `hi` is in the deque (checked before use).
    pos: usize,
    accs: Accs,
}

/// The slices of one group; see the module docs.
#[derive(Debug)]
pub(super) struct GroupSlices {
    /// The group key (memcomparable; the state key after the slice end).
    pub key: Vec<u8>,
    /// Slices in index order.
    pub slices: VecDeque<Slice>,
    prefix: Option<Prefix>,
    /// How many slices were ever freed from the front: a slice's absolute position is this
    /// plus its deque position, unchanged by later frees.
    freed: u64,
    /// HOP: the block whose slices hold suffix merges.
    suffix_block: Option<i64>,
    /// The highest slice of that block a row changed since its suffixes were computed.
    suffix_stale: Option<i64>,
    /// HOP with [`Geometry::subtract`]: the running merge, instead of prefix and suffixes.
    running: Option<Running>,
}

/// What [`GroupSlices::window`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Window {
    /// The group has no slices left.
    NoSlices,
    /// The group has no slice in the window; `next` is the first window that holds one.
    Empty { next: i64 },
    /// The window's accumulators were assembled; the windows up to `until` (exclusive) hold
    /// the same slices, so the same result.
    Assembled { until: i64 },
}

impl GroupSlices {
    pub fn new(key: Vec<u8>) -> Self {
        Self {
            key,
            slices: VecDeque::new(),
            freed: 0,
            prefix: None,
            suffix_block: None,
            suffix_stale: None,
            running: None,
        }
    }

    /// Appends a slice restored from state (slices come in index order).
    pub fn restore(&mut self, idx: i64, accs: Accs) {
        self.slices.push_back(Slice { idx, accs, suffix: None, dirty: false });
    }

    /// Applies a row to slice `idx` (created from `empty` if missing) with `apply`, and to the
    /// merges that cover it. Returns the slice's absolute position (for [`GroupSlices::slice_mut`])
    /// when it was clean before (now dirty).
    pub fn add(&mut self, g: &Geometry, idx: i64, empty: &Accs, mut apply: impl FnMut(&mut Accs)) -> Option<u64> {
        let pos = match self.slices.back() {
            Some(last) if last.idx == idx => self.slices.len() - 1,
            Some(last) if last.idx < idx => self.insert(self.slices.len(), idx, empty),
            None => self.insert(0, idx, empty),
            Some(_) => match self.slices.binary_search_by_key(&idx, |s| s.idx) {
                Ok(pos) => pos,
                Err(pos) => self.insert(pos, idx, empty),
            },
        };
        let slice = &mut self.slices[pos];
        apply(&mut slice.accs);
        let was_clean = !slice.dirty;
        slice.dirty = true;
        let block = g.block(idx);
        if let Some(p) = &mut self.prefix {
            if p.block == block && idx < p.upto {
                apply(&mut p.accs);
            }
        }
        if let Some(r) = &mut self.running {
            if idx < r.hi {
                apply(&mut r.accs);
            }
        }
        if self.suffix_block == Some(block) {
            self.suffix_stale = Some(self.suffix_stale.map_or(idx, |s| s.max(idx)));
        }
        was_clean.then_some(self.freed + pos as u64)
    }

    /// Slice `idx`, found at absolute position `abs` when no slice was inserted before it since
    /// (the usual case), else by binary search.
    pub fn slice_mut(&mut self, abs: u64, idx: i64) -> Option<&mut Slice> {
        let guess = abs.checked_sub(self.freed).map_or(0, |p| p as usize);
        let pos = position(&self.slices, guess, idx);
        self.slices.get_mut(pos).filter(|s| s.idx == idx)
    }

    fn insert(&mut self, pos: usize, idx: i64, empty: &Accs) -> usize {
        let slice = Slice { idx, accs: empty.clone(), suffix: None, dirty: false };
        self.slices.insert(pos, slice);
        if let Some(p) = &mut self.prefix {
            // Slices are in index order: one before `upto` is inserted before `p.pos`.
            if idx < p.upto {
                p.pos += 1;
            }
        }
        if let Some(r) = &mut self.running {
            if idx < r.hi {
                r.pos += 1;
            }
        }
        pos
    }

    /// Removes the slices before `first` (their state entries are deleted by the caller, all
    /// groups' at once); returns how many.
    pub fn free_before(&mut self, first: i64) -> usize {
        let mut freed = 0;
        while self.slices.front().is_some_and(|s| s.idx < first) {
            let slice = self.slices.pop_front().expect("checked");
            if let Some(r) = &mut self.running {
                if slice.idx < r.hi {
                    r.accs.subtract(&slice.accs);
                    r.pos = r.pos.saturating_sub(1);
                }
            }
            freed += 1;
        }
        self.freed += freed as u64;
        if let Some(p) = &mut self.prefix {
            p.pos = p.pos.saturating_sub(freed);
        }
        freed
    }

    /// Window `e` of this group into `out`, once its slices before the window's first are
    /// freed (see [`GroupSlices::free_before`]), and how far the same result holds: up to the
    /// next window a slice enters (slice `i` enters window `i + 1`) or, HOP, leaves (slice `i`
    /// leaves window `i + n + 1`) or, CUMULATE, the next block.
    pub fn window(&mut self, g: &Geometry, e: i64, out: &mut Accs) -> Window {
        let Some(front) = self.slices.front() else { return Window::NoSlices };
        if front.idx >= e {
            return Window::Empty { next: front.idx + 1 };
        }
        let front_idx = front.idx;
        if g.subtract {
            return self.running_window(g, e, out);
        }
        let block = g.block(e - 1);
        let block_start = block * g.n;
        if !matches!(&self.prefix, Some(p) if p.block == block && p.upto <= e) {
            // A new block: its prefix starts empty at the block's first slice.
            let pos = self.slices.partition_point(|s| s.idx < block_start);
            self.prefix = Some(Prefix { block, upto: block_start, pos, accs: empty_like(&front.accs) });
        }
        let p = self.prefix.as_mut().expect("set above");
        let pos = merge_until(&self.slices, p.pos, p.upto, e, &mut p.accs);
        p.upto = e;
        p.pos = pos;
        let entering = self.slices.get(pos).map_or(i64::MAX, |s| s.idx + 1);
        let until = entering.min(match g.kind {
            WindowKind::Hop => front_idx + g.n + 1,
            _ => block_start + g.n + 1,
        });
        out.clone_from(&p.accs);
        if g.kind == WindowKind::Hop && g.first_slice(e) < block_start && front_idx < block_start {
            self.refresh_suffixes(g, block - 1);
            if let Some(suffix) = &self.slices[0].suffix {
                out.merge(suffix);
            }
        }
        Window::Assembled { until }
    }

    /// [`GroupSlices::window`] by the running merge: the slices entering since the last window
    /// are added (the freed ones were subtracted by [`GroupSlices::free_before`]).
    fn running_window(&mut self, g: &Geometry, e: i64, out: &mut Accs) -> Window {
        let front = self.slices.front().expect("checked by window");
        let front_idx = front.idx;
        if self.running.as_ref().is_none_or(|r| r.hi > e) {
            // First window since a restart (or asked out of order): start from no slices.
            self.running = Some(Running { hi: front_idx, pos: 0, accs: empty_like(&front.accs) });
        }
        let r = self.running.as_mut().expect("set above");
        let pos = merge_until(&self.slices, r.pos, r.hi, e, &mut r.accs);
        r.hi = e;
        r.pos = pos;
        out.clone_from(&r.accs);
        let entering = self.slices.get(pos).map_or(i64::MAX, |s| s.idx + 1);
        Window::Assembled { until: entering.min(front_idx + g.n + 1) }
    }

    /// Makes the suffix merges of `block` (the front slices) current.
    fn refresh_suffixes(&mut self, g: &Geometry, block: i64) {
        if self.suffix_block == Some(block) && self.suffix_stale.is_none() {
            return;
        }
        let in_block = self.slices.partition_point(|s| g.block(s.idx) <= block);
        let top = match self.suffix_stale {
            Some(stale) if self.suffix_block == Some(block) => self.slices.partition_point(|s| s.idx <= stale),
            _ => in_block,
        };
        self.suffix_block = Some(block);
        self.suffix_stale = None;
        for pos in (0..top).rev() {
            // The old suffix's vector is reused.
            let mut suffix = self.slices[pos].suffix.take().unwrap_or_else(|| empty_like(&self.slices[pos].accs));
            suffix.clone_from(&self.slices[pos].accs);
            if pos + 1 < in_block {
                if let Some(next) = &self.slices[pos + 1].suffix {
                    suffix.merge(next);
                }
            }
            self.slices[pos].suffix = Some(suffix);
        }
    }
}

/// The position in `slices` of the first slice at or after `idx`: `guess` when it is that
/// position (the usual case, O(1)), else found by binary search.
fn position(slices: &VecDeque<Slice>, guess: usize, idx: i64) -> usize {
    let fits = guess <= slices.len()
        && (guess == 0 || slices[guess - 1].idx < idx)
        && (guess == slices.len() || slices[guess].idx >= idx);
    if fits {
        guess
    } else {
        slices.partition_point(|s| s.idx < idx)
    }
}

/// Merges the slices in `[from, e)` into `accs`, the first found at deque position `hint`
/// when that is right (see [`position`]); returns the position of the first slice at or after
/// `e`.
fn merge_until(slices: &VecDeque<Slice>, hint: usize, from: i64, e: i64, accs: &mut Accs) -> usize {
    let mut pos = position(slices, hint, from);
    while let Some(slice) = slices.get(pos).filter(|s| s.idx < e) {
        accs.merge(&slice.accs);
        pos += 1;
    }
    pos
}

/// Accumulators of no rows, shaped like `like`.
pub(super) fn empty_like(like: &Accs) -> Accs {
    Accs {
        rows: 0,
        accs: like
            .accs
            .iter()
            .map(|a| match a {
                Acc::Count(_) => Acc::Count(0),
                Acc::SumInt(..) => Acc::SumInt(0, 0),
                Acc::SumFloat(..) => Acc::SumFloat(0.0, 0),
                Acc::Min(_) => Acc::Min(None),
                Acc::Max(_) => Acc::Max(None),
            })
            .collect(),
    }
}
