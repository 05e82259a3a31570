//! What reductions combine: the operator and element type codes, the element types (f16, bf16, the
//! maxloc pair) and their arithmetic.

/// Reduction operators (NVSHMEM's `rdxn_ops_t` values).
pub mod op {
    /// Bitwise AND (integer types only).
    pub const AND: u32 = 0;
    /// Bitwise OR (integer types only).
    pub const OR: u32 = 1;
    /// Bitwise XOR (integer types only).
    pub const XOR: u32 = 2;
    /// Minimum.
    pub const MIN: u32 = 3;
    /// Maximum.
    pub const MAX: u32 = 4;
    /// Sum (wrapping for integers).
    pub const SUM: u32 = 5;
    /// Product (wrapping for integers).
    pub const PROD: u32 = 6;
    /// The largest value with its location, the smaller location on a tie (`DOUBLE2` only).
    pub const MAXLOC: u32 = 7;
}

/// Element types of the reductions (the C ABI's codes).
pub mod dtype {
    /// `i8` (C `int8_t`).
    pub const I8: u32 = 0;
    /// `i16` (C `int16_t`).
    pub const I16: u32 = 1;
    /// `i32` (C `int32_t`).
    pub const I32: u32 = 2;
    /// `i64` (C `int64_t`).
    pub const I64: u32 = 3;
    /// `u8` (C `uint8_t`).
    pub const U8: u32 = 4;
    /// `u16` (C `uint16_t`).
    pub const U16: u32 = 5;
    /// `u32` (C `uint32_t`).
    pub const U32: u32 = 6;
    /// `u64` (C `uint64_t`).
    pub const U64: u32 = 7;
    /// IEEE half precision ([`super::F16`], CUDA's `half`).
    pub const F16: u32 = 8;
    /// bfloat16 ([`super::Bf16`], CUDA's `__nv_bfloat16`).
    pub const BF16: u32 = 9;
    /// `f32` (C `float`).
    pub const F32: u32 = 10;
    /// `f64` (C `double`).
    pub const F64: u32 = 11;
    /// A (value, location) pair of f64s, for maxloc (NVSHMEM's double2).
    pub const DOUBLE2: u32 = 12;
}

/// IEEE half precision, as its bits.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct F16(pub u16);
/// bfloat16, as its bits.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Bf16(pub u16);
/// A maxloc pair (NVSHMEM's double2: x is the value, y the location).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct DoubleLoc {
    /// The value compared (double2's `x`).
    pub value: f64,
    /// Where the value came from (double2's `y`); the smaller one wins a tie.
    pub loc: f64,
}

impl F16 {
    /// Exact widening.
    pub fn to_f32(self) -> f32 {
        let h = self.0 as u32;
        let sign = (h & 0x8000) << 16;
        let exp = (h >> 10) & 0x1f;
        let man = h & 0x3ff;
        let bits = if exp == 0 {
            if man == 0 {
                sign
            } else {
                // Subnormal: normalize.
                let mut e = 127 - 15 + 1;
                let mut m = man;
                while m & 0x400 == 0 {
                    m <<= 1;
                    e -= 1;
                }
                sign | ((e as u32) << 23) | ((m & 0x3ff) << 13)
            }
        } else if exp == 0x1f {
            sign | 0x7f80_0000 | (man << 13)
        } else {
            sign | ((exp + 127 - 15) << 23) | (man << 13)
        };
        f32::from_bits(bits)
    }
    /// Rounded to nearest, ties to even.
    pub fn from_f32(f: f32) -> F16 {
        let x = f.to_bits();
        let sign = ((x >> 16) & 0x8000) as u16;
        let exp = ((x >> 23) & 0xff) as i32;
        let man = x & 0x7f_ffff;
        if exp == 0xff {
            return F16(sign | 0x7c00 | if man != 0 { 0x200 } else { 0 });
        }
        let e = exp - 127 + 15;
        if e >= 0x1f {
            return F16(sign | 0x7c00);
        }
        if e <= 0 {
            if e < -10 {
                return F16(sign);
            }
            let m = man | 0x80_0000;
            let shift = (14 - e) as u32;
            let half = 1u32 << (shift - 1);
            let rest = m & ((1 << shift) - 1);
            let mut r = m >> shift;
            if rest > half || (rest == half && r & 1 == 1) {
                r += 1;
            }
            return F16(sign | r as u16);
        }
        let mut r = ((e as u32) << 10) | (man >> 13);
        let rest = man & 0x1fff;
        if rest > 0x1000 || (rest == 0x1000 && r & 1 == 1) {
            r += 1; // may carry into the exponent, up to infinity: correct
        }
        F16(sign | r as u16)
    }
}

impl Bf16 {
    /// Exact widening (a bfloat16 is the high half of an f32).
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
    /// Rounded to nearest, ties to even.
    pub fn from_f32(f: f32) -> Bf16 {
        let x = f.to_bits();
        if f.is_nan() {
            return Bf16(((x >> 16) | 0x40) as u16);
        }
        Bf16(((x + 0x7fff + ((x >> 16) & 1)) >> 16) as u16)
    }
}

/// Element types of reductions: the operators each has.
pub trait Elem: Copy {
    /// The type's code (`dtype::*`), as the untyped reductions take it.
    const DTYPE: u32;
    /// `a OP b`; `OP` is one of `op::*` that this type has (checked before any call).
    fn combine<const OP: u32>(a: Self, b: Self) -> Self;
}

macro_rules! int_elems {
    ($($t:ty => $d:ident;)*) => {$(
        impl Elem for $t {
            const DTYPE: u32 = dtype::$d;
            #[inline(always)]
            fn combine<const OP: u32>(a: $t, b: $t) -> $t {
                match OP {
                    op::AND => a & b,
                    op::OR => a | b,
                    op::XOR => a ^ b,
                    op::MIN => if b < a { b } else { a },
                    op::MAX => if b > a { b } else { a },
                    op::SUM => a.wrapping_add(b),
                    _ => a.wrapping_mul(b),
                }
            }
        }
    )*};
}
int_elems! { i8 => I8; i16 => I16; i32 => I32; i64 => I64; u8 => U8; u16 => U16; u32 => U32; u64 => U64; }

macro_rules! float_elems {
    ($($t:ty => $d:ident, $wide:ty, $to:expr, $from:expr;)*) => {$(
        impl Elem for $t {
            const DTYPE: u32 = dtype::$d;
            #[inline(always)]
            fn combine<const OP: u32>(a: $t, b: $t) -> $t {
                let (x, y): ($wide, $wide) = ($to(a), $to(b));
                $from(match OP {
                    op::MIN => if y < x { y } else { x },
                    op::MAX => if y > x { y } else { x },
                    op::SUM => x + y,
                    _ => x * y,
                })
            }
        }
    )*};
}
float_elems! {
    f32 => F32, f32, |v| v, |v| v;
    f64 => F64, f64, |v| v, |v| v;
    F16 => F16, f32, F16::to_f32, F16::from_f32;
    Bf16 => BF16, f32, Bf16::to_f32, Bf16::from_f32;
}

impl Elem for DoubleLoc {
    const DTYPE: u32 = dtype::DOUBLE2;
    #[inline(always)]
    fn combine<const OP: u32>(a: DoubleLoc, b: DoubleLoc) -> DoubleLoc {
        // The larger value; on a tie, the smaller location (OpenSHMEM's MAXLOC).
        if b.value > a.value || (b.value == a.value && b.loc < a.loc) { b } else { a }
    }
}

/// Whether type `dt` has operator `o`.
pub const fn valid_reduction(dt: u32, o: u32) -> bool {
    match dt {
        dtype::I8..=dtype::U64 => o <= op::PROD,
        dtype::F16..=dtype::F64 => o >= op::MIN && o <= op::PROD,
        dtype::DOUBLE2 => o == op::MAXLOC,
        _ => false,
    }
}

/// Size in bytes of an element of type `dt` (0 for an unknown code).
pub const fn dtype_size(dt: u32) -> usize {
    match dt {
        dtype::I8 | dtype::U8 => 1,
        dtype::I16 | dtype::U16 | dtype::F16 | dtype::BF16 => 2,
        dtype::I32 | dtype::U32 | dtype::F32 => 4,
        dtype::I64 | dtype::U64 | dtype::F64 => 8,
        dtype::DOUBLE2 => 16,
        _ => 0,
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn f16_round_trips_every_value() {
        for h in 0..=u16::MAX {
            let f = F16(h).to_f32();
            let back = F16::from_f32(f);
            if f.is_nan() {
                assert!(F16::from_f32(f).to_f32().is_nan());
            } else {
                assert_eq!(back, F16(h), "{h:#x} -> {f} -> {:#x}", back.0);
            }
        }
    }

    #[test]
    fn f16_rounds_to_nearest_even() {
        assert_eq!(F16::from_f32(1.0), F16(0x3c00));
        assert_eq!(F16::from_f32(65504.0), F16(0x7bff));
        assert_eq!(F16::from_f32(65520.0), F16(0x7c00)); // halfway to the next: rounds up to inf
        assert_eq!(F16::from_f32(1.0 + 1.0 / 2048.0), F16(0x3c00)); // tie: to even
        assert_eq!(F16::from_f32(1.0 + 3.0 / 2048.0), F16(0x3c02)); // tie: to even (up)
        assert_eq!(F16::from_f32(5.960_464_5e-8), F16(1)); // smallest subnormal
        assert_eq!(F16::from_f32(2.0e-8), F16(0));
        assert_eq!(F16::from_f32(-2.0), F16(0xc000));
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(Bf16::from_f32(1.0), Bf16(0x3f80));
        assert_eq!(Bf16::from_f32(f32::from_bits(0x3f80_8000)), Bf16(0x3f80)); // tie, even stays
        assert_eq!(Bf16::from_f32(f32::from_bits(0x3f81_8000)), Bf16(0x3f82)); // tie, odd goes up
        assert_eq!(Bf16::from_f32(f32::from_bits(0x3f80_8001)), Bf16(0x3f81));
        assert!(Bf16::from_f32(f32::NAN).to_f32().is_nan());
        for b in 0..=u16::MAX {
            let f = Bf16(b).to_f32();
            if !f.is_nan() {
                assert_eq!(Bf16::from_f32(f), Bf16(b));
            }
        }
    }

    #[test]
    fn reduction_table() {
        assert!(valid_reduction(dtype::I32, op::XOR));
        assert!(!valid_reduction(dtype::F32, op::XOR));
        assert!(valid_reduction(dtype::BF16, op::PROD));
        assert!(valid_reduction(dtype::DOUBLE2, op::MAXLOC));
        assert!(!valid_reduction(dtype::DOUBLE2, op::SUM));
        assert!(!valid_reduction(13, op::SUM));
        let m = DoubleLoc::combine::<{ op::MAXLOC }>(DoubleLoc { value: 2.0, loc: 5.0 }, DoubleLoc { value: 2.0, loc: 3.0 });
        assert_eq!(m, DoubleLoc { value: 2.0, loc: 3.0 });
        assert_eq!(i8::combine::<{ op::SUM }>(100, 100), -56);
        assert_eq!(u16::combine::<{ op::MIN }>(3, 2), 2);
    }
}
