//! The element types the package handles: those torch and rshmem's device API share (float16,
//! bfloat16, float32, float64, and the signed and unsigned integers of 8 to 64 bits), with their names,
//! sizes, DLPack codes, NumPy buffer formats and the runtime's reduction type codes.

use rshmem::coll::dtype as rd;

/// An element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    BF16,
    F32,
    F64,
}

/// DLPack's type codes (`DLDataTypeCode`).
const DL_INT: u8 = 0;
const DL_UINT: u8 = 1;
const DL_FLOAT: u8 = 2;
const DL_BFLOAT: u8 = 4;

impl DType {
    /// Every type, in the order the names list them.
    pub const ALL: [DType; 12] =
        [DType::F16, DType::BF16, DType::F32, DType::F64, DType::I8, DType::I16, DType::I32, DType::I64, DType::U8, DType::U16, DType::U32, DType::U64];

    /// The canonical name (NumPy's and torch's, without `torch.`).
    pub fn name(self) -> &'static str {
        match self {
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// The type of a name: the canonical one, with or without `torch.`, or torch's aliases
    /// (`half`, `float`, `double`, `short`, `int`, `long`).
    pub fn from_name(name: &str) -> Option<DType> {
        let n = name.trim();
        let n = n.strip_prefix("torch.").unwrap_or(n);
        let alias = match n {
            "half" => "float16",
            "float" => "float32",
            "double" => "float64",
            "short" => "int16",
            "int" => "int32",
            "long" => "int64",
            other => other,
        };
        DType::ALL.into_iter().find(|d| d.name() == alias)
    }

    /// Every accepted name, for messages.
    pub fn names() -> String {
        DType::ALL.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        rshmem_device::coll::dtype_size(self.reduce_code())
    }

    /// Whether it is an integer type (the bitwise reductions apply).
    pub fn is_integer(self) -> bool {
        !matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// Whether it is a signed integer type.
    pub fn is_signed_integer(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    /// The runtime's reduction type code (`rshmem::coll::dtype`).
    pub fn reduce_code(self) -> u32 {
        match self {
            DType::I8 => rd::I8,
            DType::I16 => rd::I16,
            DType::I32 => rd::I32,
            DType::I64 => rd::I64,
            DType::U8 => rd::U8,
            DType::U16 => rd::U16,
            DType::U32 => rd::U32,
            DType::U64 => rd::U64,
            DType::F16 => rd::F16,
            DType::BF16 => rd::BF16,
            DType::F32 => rd::F32,
            DType::F64 => rd::F64,
        }
    }

    /// DLPack's (type code, bits).
    pub fn dlpack(self) -> (u8, u8) {
        let code = match self {
            DType::F16 | DType::F32 | DType::F64 => DL_FLOAT,
            DType::BF16 => DL_BFLOAT,
            d if d.is_signed_integer() => DL_INT,
            _ => DL_UINT,
        };
        (code, (self.size() * 8) as u8)
    }

    /// The type of a buffer-protocol format string (`struct` module syntax, as NumPy writes it) of
    /// `itemsize`-byte elements; None for anything else (bool, complex, records, bfloat16's
    /// extension types).
    pub fn from_buffer_format(format: &str, itemsize: usize) -> Option<DType> {
        let f = format.trim_start_matches(['@', '=', '<', '>', '!']);
        // A byte order other than the native one (little-endian on every platform rshmem runs on).
        if format.starts_with(['>', '!']) && itemsize > 1 {
            return None;
        }
        let int = |signed: bool| -> Option<DType> {
            Some(match (signed, itemsize) {
                (true, 1) => DType::I8,
                (true, 2) => DType::I16,
                (true, 4) => DType::I32,
                (true, 8) => DType::I64,
                (false, 1) => DType::U8,
                (false, 2) => DType::U16,
                (false, 4) => DType::U32,
                (false, 8) => DType::U64,
                _ => return None,
            })
        };
        match f {
            "b" | "h" | "i" | "l" | "q" | "n" => int(true),
            "B" | "H" | "I" | "L" | "Q" | "N" => int(false),
            "e" if itemsize == 2 => Some(DType::F16),
            "f" if itemsize == 4 => Some(DType::F32),
            "d" if itemsize == 8 => Some(DType::F64),
            _ => None,
        }
    }
}
