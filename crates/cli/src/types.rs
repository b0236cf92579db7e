//! NCCL datatypes and reduction operations as nccl-tests names and orders them.

/// One of the twelve NCCL datatypes, in NCCL enum order (which is also the `-d all` order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    /// `int8`
    Int8,
    /// `uint8`
    Uint8,
    /// `int32`
    Int32,
    /// `uint32`
    Uint32,
    /// `int64`
    Int64,
    /// `uint64`
    Uint64,
    /// `half` (IEEE binary16)
    Half,
    /// `float` (IEEE binary32)
    Float,
    /// `double` (IEEE binary64)
    Double,
    /// `bfloat16`
    Bfloat16,
    /// `f8e4m3` (OCP FP8 E4M3, saturating, no infinities)
    F8e4m3,
    /// `f8e5m2` (OCP FP8 E5M2)
    F8e5m2,
}

impl DataType {
    /// Every datatype in NCCL enum order.
    pub const ALL: [DataType; 12] = [
        DataType::Int8,
        DataType::Uint8,
        DataType::Int32,
        DataType::Uint32,
        DataType::Int64,
        DataType::Uint64,
        DataType::Half,
        DataType::Float,
        DataType::Double,
        DataType::Bfloat16,
        DataType::F8e4m3,
        DataType::F8e5m2,
    ];

    /// The name nccl-tests prints and accepts (`-d`).
    pub fn name(self) -> &'static str {
        match self {
            DataType::Int8 => "int8",
            DataType::Uint8 => "uint8",
            DataType::Int32 => "int32",
            DataType::Uint32 => "uint32",
            DataType::Int64 => "int64",
            DataType::Uint64 => "uint64",
            DataType::Half => "half",
            DataType::Float => "float",
            DataType::Double => "double",
            DataType::Bfloat16 => "bfloat16",
            DataType::F8e4m3 => "f8e4m3",
            DataType::F8e5m2 => "f8e5m2",
        }
    }

    /// Parses an exact (case-sensitive) datatype name.
    pub fn from_name(name: &str) -> Option<DataType> {
        DataType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Element size in bytes.
    pub fn size(self) -> usize {
        match self {
            DataType::Int8 | DataType::Uint8 | DataType::F8e4m3 | DataType::F8e5m2 => 1,
            DataType::Half | DataType::Bfloat16 => 2,
            DataType::Int32 | DataType::Uint32 | DataType::Float => 4,
            DataType::Int64 | DataType::Uint64 | DataType::Double => 8,
        }
    }

    /// The `ncclDataType_t` value.
    pub fn nccl_id(self) -> i32 {
        self as i32
    }

    /// True for the floating-point types (half, float, double, bfloat16, fp8).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DataType::Half
                | DataType::Float
                | DataType::Double
                | DataType::Bfloat16
                | DataType::F8e4m3
                | DataType::F8e5m2
        )
    }

    /// True for the signed integer types.
    pub fn is_signed_int(self) -> bool {
        matches!(self, DataType::Int8 | DataType::Int32 | DataType::Int64)
    }

    /// True for the 8-bit floating-point types, which need compute capability 9.0 for `-d all`.
    pub fn is_fp8(self) -> bool {
        matches!(self, DataType::F8e4m3 | DataType::F8e5m2)
    }

    /// (exponent bits, mantissa bits) of a floating-point type; `None` for integers.
    pub fn float_layout(self) -> Option<(u32, u32)> {
        match self {
            DataType::Half => Some((5, 10)),
            DataType::Bfloat16 => Some((8, 7)),
            DataType::Float => Some((8, 23)),
            DataType::Double => Some((11, 52)),
            DataType::F8e4m3 => Some((4, 3)),
            DataType::F8e5m2 => Some((5, 2)),
            _ => None,
        }
    }
}

/// A reduction operation, in nccl-tests' `-o all` order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RedOp {
    /// `sum`
    Sum,
    /// `prod`
    Prod,
    /// `max`
    Max,
    /// `min`
    Min,
    /// `avg`
    Avg,
    /// `mulsum`: a PreMulSum op with scalar 1 on even ranks and 2 on odd ranks.
    MulSum,
}

impl RedOp {
    /// Every op in `-o all` order.
    pub const ALL: [RedOp; 6] = [
        RedOp::Sum,
        RedOp::Prod,
        RedOp::Max,
        RedOp::Min,
        RedOp::Avg,
        RedOp::MulSum,
    ];

    /// The name nccl-tests prints and accepts (`-o`).
    pub fn name(self) -> &'static str {
        match self {
            RedOp::Sum => "sum",
            RedOp::Prod => "prod",
            RedOp::Max => "max",
            RedOp::Min => "min",
            RedOp::Avg => "avg",
            RedOp::MulSum => "mulsum",
        }
    }

    /// Parses an exact (case-sensitive) op name.
    pub fn from_name(name: &str) -> Option<RedOp> {
        RedOp::ALL.into_iter().find(|o| o.name() == name)
    }

    /// The built-in `ncclRedOp_t` value; `None` for `mulsum`, whose op id NCCL creates at run time.
    pub fn nccl_builtin(self) -> Option<i32> {
        match self {
            RedOp::Sum => Some(0),
            RedOp::Prod => Some(1),
            RedOp::Max => Some(2),
            RedOp::Min => Some(3),
            RedOp::Avg => Some(4),
            RedOp::MulSum => None,
        }
    }
}

/// `-R`: how the send and receive buffers are registered with the communicator: the mode the
/// options request, and the one the GPU layer applies after the loaded NCCL's rules (no `-R`
/// before 2.19, `-R 2` as `-R 1` before 2.27).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Register {
    /// `-R 0`.
    Off,
    /// `-R 1`: `ncclCommRegister`.
    Local,
    /// `-R 2`: `ncclCommWindowRegister` with `NCCL_WIN_COLL_SYMMETRIC` (NCCL ≥ 2.27).
    Symmetric,
}

impl Register {
    /// The mode of `-R r`, for `r` in 0..=2.
    pub fn from_number(r: i64) -> Option<Register> {
        match r {
            0 => Some(Register::Off),
            1 => Some(Register::Local),
            2 => Some(Register::Symmetric),
            _ => None,
        }
    }

    /// The `-R` number of this mode.
    pub fn number(self) -> i64 {
        match self {
            Register::Off => 0,
            Register::Local => 1,
            Register::Symmetric => 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sizes() {
        for t in DataType::ALL {
            assert_eq!(DataType::from_name(t.name()), Some(t));
        }
        assert_eq!(DataType::from_name("fp16"), None);
        assert_eq!(DataType::from_name("Float"), None);
        assert_eq!(DataType::Bfloat16.size(), 2);
        assert_eq!(DataType::F8e5m2.nccl_id(), 11);
        for o in RedOp::ALL {
            assert_eq!(RedOp::from_name(o.name()), Some(o));
        }
        assert_eq!(RedOp::Max.nccl_builtin(), Some(2));
    }
}
