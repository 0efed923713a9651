//! WindowAssign: the streaming side of TUMBLE, HOP and CUMULATE.
//!
//! Gives every changelog row one output row per window it belongs to, with `window_start`,
//! `window_end`, `window_time` appended, and the row's op. A window whose `window_time` the
//! watermark has reached is closed (Flink: it fired): rows for it are late and dropped. Lateness
//! is per window (SQL.md): a HOP row still counts in those of its windows that are open. A row
//! that lands in no open window is counted in `num_late_rows`.
//!
//! Changelog mode: the input's. State: the current watermark and the late-row count, in the
//! `watermark` table (one entry), so both survive a restart.

use arrow::datatypes::SchemaRef;

use crate::error::{Result, WeirError};
use crate::plan::window::WindowSpec;
use crate::runtime::changelog::StreamChunk;
use crate::runtime::operator::{OpContext, Operator};
use crate::state::{EpochWrites, StateTable, Store};

/// The stable name of the watermark table.
pub const WATERMARK: &str = "watermark";

/// Assigns windows; see the module docs.
pub struct WindowAssign {
    spec: WindowSpec,
    /// Output schema: input columns then the three window columns.
    schema: SchemaRef,
    /// The watermark, ms; `None` before the first.
    watermark_ms: Option<i64>,
    /// Rows dropped because every window they belong to was closed.
    num_late_rows: u64,
    /// Late input rows not yet taken by the side-table writer, with the watermark.
    late: Vec<(arrow::array::RecordBatch, i64)>,
    state: StateTable,
}

impl WindowAssign {
    /// A window assigner for `spec` producing `schema`, its state in `state_table(WATERMARK)`.
    pub fn try_new(
        spec: WindowSpec,
        schema: SchemaRef,
        state_table: &mut dyn FnMut(&str) -> u32,
        store: &Store,
    ) -> Result<Self> {
        let state = StateTable::new(state_table(WATERMARK));
        let (watermark_ms, num_late_rows) = match state.get(store, b"")? {
            Some(v) if v.len() == 17 => {
                let wm = (v[0] == 1).then(|| i64::from_le_bytes(v[1..9].try_into().expect("8 bytes")));
                (wm, u64::from_le_bytes(v[9..17].try_into().expect("8 bytes")))
            }
            Some(_) => return Err(WeirError::storage("corrupt window watermark state")),
            None => (None, 0),
        };
        Ok(Self { spec, schema, watermark_ms, num_late_rows, late: Vec::new(), state })
    }

    fn save(&mut self) {
        let mut v = Vec::with_capacity(17);
        v.push(self.watermark_ms.is_some() as u8);
        v.extend_from_slice(&self.watermark_ms.unwrap_or(0).to_le_bytes());
        v.extend_from_slice(&self.num_late_rows.to_le_bytes());
        self.state.put(Vec::new(), v);
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
        let watermark = self.watermark_ms;
        let lateness = self.spec.allowed_lateness_ms;
        let mut kept = vec![false; chunk.len()];
        let (batch, rows) = self.spec.assign(&chunk.batch, &self.schema, |row, end| {
            // Closed once the watermark reaches window_time = end - 1.
            let open = watermark.is_none_or(|wm| end - 1 > wm - lateness);
            kept[row] |= open;
            open
        })?;
        let late: Vec<u32> = (0..chunk.len())
            .filter(|r| !kept[*r] && chunk.ops[*r].is_insert() && chunk.batch.column(self.spec.time_index).is_valid(*r))
            .map(|r| r as u32)
            .collect();
        if !late.is_empty() {
            self.num_late_rows += late.len() as u64;
            self.save();
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
        if self.watermark_ms.is_none_or(|wm| watermark_ms > wm) {
            self.watermark_ms = Some(watermark_ms);
            self.save();
        }
        Ok((None, Some(watermark_ms)))
    }

    fn num_late_rows(&self) -> u64 {
        self.num_late_rows
    }

    fn take_late_rows(&mut self) -> Vec<(arrow::array::RecordBatch, i64)> {
        std::mem::take(&mut self.late)
    }

    fn on_barrier(&mut self, writes: &mut EpochWrites) -> Result<()> {
        self.state.flush(writes);
        Ok(())
    }
}
