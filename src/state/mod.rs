//! State: RocksDB state tables with memcomparable keys and one atomic commit per epoch.
pub mod codec;
pub mod key_group;
pub mod overlay;
pub mod state_table;
pub mod store;

pub use codec::RowCodec;
pub use key_group::{KeyGroups, TableRef};
pub use overlay::{Overlaid, TableWrites};
pub use state_table::StateTable;
pub use store::{DeferredWrites, EpochWrites, Landed, ScanState, Store, StoreOptions, StoreSnapshot, DEFAULT_STATE_CACHE_BYTES};
