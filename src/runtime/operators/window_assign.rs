//! WindowAssign: the streaming side of TUMBLE, HOP and CUMULATE.
//!
//! Gives every changelog row one output row per window it belongs to, with `window_start`,
//! `window_end`, `window_time` appended, and the row's op. A window whose `window_time` the
//! watermark has reached is closed (Flink: it fired): rows for it are late and dropped. Lateness
//! is per window (SQL.md): a HOP row still counts in those of its windows that are open. A row
//! that lands in no open window is dropped and counted in `num_late_rows`, and so is a row whose
//! event time is NULL (it lands in no window at all); a retraction (an `UPDATE`'s or `DELETE`'s
//! old row) for closed windows too, as Flink counts every dropped record.
//!
//! In slice mode (HOP and CUMULATE under a sliced window aggregate, [`WindowSpec::slices`])
//! each row gets one output row, for its slice, and is late once every window of the slice
//! has fired.
//!
//! SESSION under a session window aggregate ([`WindowSpec::slices`] too) is assigned here
//! as well: each row gets its lone session `[t, t + gap)`, and none is dropped here; the
//! aggregate merges the sessions and drops and counts the late rows (those whose merged session
//! is closed, which only it can tell).
//!
//! Under a window join ([`WindowSpec::late_in_join`]) no row is dropped here: the join decides
//! lateness by the minimum of both inputs' watermarks.
//!
//! Changelog mode: the input's. State: the current watermark and the late-row count, in the
//! `watermark` table (one entry), so both survive a restart.

use arrow::datatypes::SchemaRef;

use crate::error::Result;
use crate::plan::window::{WindowKind, WindowSpec};
use crate::runtime::changelog::StreamChunk;
use crate::runtime::operator::{OpContext, Operator};
use crate::runtime::operators::progress::{Progress, WATERMARK};
use crate::state::{EpochWrites, Store, TableRef};

/// Assigns windows; see the module docs.
pub struct WindowAssign {
    spec: WindowSpec,
    /// Output schema: input columns then the three window columns.
    schema: SchemaRef,
    /// Watermark and the rows dropped because every window they belong to was closed.
    progress: Progress,
    /// Late input rows not yet taken by the side-table writer, with the watermark.
    late: Vec<(arrow::array::RecordBatch, i64)>,
}

impl WindowAssign {
    /// A window assigner for `spec` producing `schema`, its state in `state_table(WATERMARK)`.
    pub fn try_new(
        spec: WindowSpec,
        schema: SchemaRef,
        state_table: &mut dyn FnMut(&str) -> TableRef,
        store: &Store,
    ) -> Result<Self> {
        let progress = Progress::load(state_table(WATERMARK), store)?;
        Ok(Self { spec, schema, progress, late: Vec::new() })
    }
}

impl WindowAssign {
    /// Slice mode ([`WindowSpec::slices`]): each row with its slice, unless every window of the
    /// slice has fired; `kept[row]` says which rows were kept.
    fn assign_slices(
        &self,
        batch: &arrow::array::RecordBatch,
        kept: &mut [bool],
    ) -> Result<(arrow::array::RecordBatch, Vec<u32>)> {
        use arrow::array::{Array, TimestampMillisecondArray};
        use arrow::datatypes::{DataType, TimeUnit};
        let times = arrow::compute::cast(batch.column(self.spec.time_index), &DataType::Timestamp(TimeUnit::Millisecond, None))?;
        let times = times
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .ok_or_else(|| crate::error::WeirError::internal("window time column did not cast to TIMESTAMP(3)"))?;
        let watermark = self.progress.watermark_ms;
        let lateness = self.spec.allowed_lateness_ms;
        let mut rows = Vec::with_capacity(batch.num_rows());
        let mut slices = Vec::with_capacity(batch.num_rows());
        for (row, kept) in kept.iter_mut().enumerate() {
            if times.is_null(row) {
                continue;
            }
            let t = times.value(row);
            *kept = watermark.is_none_or(|wm| self.spec.last_window_end(t) - 1 > wm - lateness);
            if *kept {
                rows.push(row as u32);
                slices.push(self.spec.slice_of(t));
            }
        }
        Ok((crate::plan::window::windowed_rows(batch, &self.schema, &rows, &slices)?, rows))
    }
}

impl Operator for WindowAssign {
    fn name(&self) -> &'static str {
        "WindowAssign"
    }

    fn state_tables(&self) -> &'static [&'static str] {
        &[WATERMARK]
    }

    fn process_batch(
        &mut self,
        _input: usize,
        chunk: StreamChunk,
        _ctx: &OpContext<'_>,
    ) -> Result<Option<StreamChunk>> {
        let watermark = self.progress.watermark_ms;
        let lateness = self.spec.allowed_lateness_ms;
        let mut kept = vec![false; chunk.len()];
        // Under a session window aggregate, which decides: a row whose own session is closed
        // still joins an open session it touches.
        let session_aggregate = self.spec.slices && self.spec.kind == WindowKind::Session;
        let (batch, rows) = if self.spec.slices && !session_aggregate {
            self.assign_slices(&chunk.batch, &mut kept)?
        } else {
            self.spec.assign(&chunk.batch, &self.schema, |row, end| {
                // Closed once the watermark reaches window_time = end - 1.
                let open = session_aggregate || self.spec.late_in_join || watermark.is_none_or(|wm| end - 1 > wm - lateness);
                kept[row] |= open;
                open
            })?
        };
        // Every row dropped is counted, a retraction too (Flink's numLateRecordsDropped counts
        // each record, whatever its kind); a row with a NULL event time is in no window, so it
        // is dropped and counted too (Flink fails the job on it instead; SQL.md: no row
        // disappears silently). Only insertions go to the late-rows table, which holds rows.
        let dropped = kept.iter().filter(|k| !**k).count();
        self.progress.add_late(dropped as u64);
        let late: Vec<u32> = (0..chunk.len())
            .filter(|r| !kept[*r] && chunk.ops[*r].is_insert())
            .map(|r| r as u32)
            .collect();
        if !late.is_empty() {
            let rows = arrow::compute::take_record_batch(&chunk.batch, &arrow::array::UInt32Array::from(late))?;
            self.late.push((rows, watermark.unwrap_or(i64::MIN)));
        }
        if batch.num_rows() == 0 {
            return Ok(None);
        }
        let ops = rows.iter().map(|r| chunk.ops[*r as usize]).collect();
        Ok(Some(StreamChunk::new(ops, batch)))
    }

    fn on_watermark(
        &mut self,
        _input: usize,
        watermark_ms: i64,
        _ctx: &OpContext<'_>,
    ) -> Result<(Option<StreamChunk>, Option<i64>)> {
        self.progress.advance(watermark_ms);
        Ok((None, Some(watermark_ms)))
    }

    fn event_time_watermark(&self) -> Option<Option<i64>> {
        Some(self.progress.watermark_ms)
    }

    fn num_late_rows(&self) -> u64 {
        self.progress.num_late_rows
    }

    fn take_late_rows(&mut self) -> Vec<(arrow::array::RecordBatch, i64)> {
        std::mem::take(&mut self.late)
    }

    fn on_barrier(&mut self, writes: &mut EpochWrites, _ctx: &OpContext<'_>) -> Result<()> {
        self.progress.flush(writes);
        Ok(())
    }
}
