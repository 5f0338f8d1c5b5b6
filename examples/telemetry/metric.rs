//! The metric model: interned metric ids, their four families, and the sample
//! every send carries.

/// A metric, interned to a dense id as a real pipeline would do at registration:
/// cheap to hash, copy and compare on every send; the name is only for display.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MetricId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Cpu,
    Mem,
    Disk,
    Net,
}

/// The family the filtered consumer subscribes to.
pub const FILTERED_FAMILY: Family = Family::Disk;

impl Family {
    pub const ALL: [Family; 4] = [Family::Cpu, Family::Mem, Family::Disk, Family::Net];

    pub fn name(self) -> &'static str {
        match self {
            Family::Cpu => "cpu",
            Family::Mem => "mem",
            Family::Disk => "disk",
            Family::Net => "net",
        }
    }
}

impl MetricId {
    /// Ids are assigned round-robin over the families at registration.
    pub fn family(self) -> Family {
        Family::ALL[self.0 as usize % Family::ALL.len()]
    }

    pub fn name(self) -> String {
        let host = self.0 as usize / Family::ALL.len();
        format!("{}.host-{host:04}", self.family().name())
    }
}

/// One reading. `Copy` and 16 bytes, so a merge is a plain overwrite.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub value: f64,
    pub ts_ns: u64,
}
