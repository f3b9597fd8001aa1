//! The four numeric column types seen two ways: as a signed integer (for the integer codecs; a
//! float's bit pattern, sign-extended) and as a word of `BITS` bits (for the XOR codecs and
//! `PLAIN`). Both views are bijective on the type, so every codec is lossless for floats too,
//! NaN payloads and -0.0 included.

/// A numeric column value.
pub(crate) trait Scalar: Copy + 'static {
    /// 32 or 64.
    const BITS: u32;
    /// The IoTDB type name, for errors.
    const TYPE_NAME: &'static str;
    /// The integer view: the value itself, or a float's bit pattern as a signed integer.
    fn to_i64(self) -> i64;
    /// The inverse of [`Scalar::to_i64`]; `None` when `v` is out of the type's range.
    fn from_i64(v: i64) -> Option<Self>;
    /// The word view: the `BITS`-bit pattern, zero-extended.
    fn to_word(self) -> u64;
    /// The inverse of [`Scalar::to_word`]; bits above `BITS` must be zero.
    fn from_word(w: u64) -> Self;
}

impl Scalar for i32 {
    const BITS: u32 = 32;
    const TYPE_NAME: &'static str = "INT32";
    #[inline]
    fn to_i64(self) -> i64 {
        i64::from(self)
    }
    #[inline]
    fn from_i64(v: i64) -> Option<i32> {
        i32::try_from(v).ok()
    }
    #[inline]
    fn to_word(self) -> u64 {
        u64::from(self as u32)
    }
    #[inline]
    fn from_word(w: u64) -> i32 {
        w as u32 as i32
    }
}

impl Scalar for i64 {
    const BITS: u32 = 64;
    const TYPE_NAME: &'static str = "INT64";
    #[inline]
    fn to_i64(self) -> i64 {
        self
    }
    #[inline]
    fn from_i64(v: i64) -> Option<i64> {
        Some(v)
    }
    #[inline]
    fn to_word(self) -> u64 {
        self as u64
    }
    #[inline]
    fn from_word(w: u64) -> i64 {
        w as i64
    }
}

impl Scalar for f32 {
    const BITS: u32 = 32;
    const TYPE_NAME: &'static str = "FLOAT";
    #[inline]
    fn to_i64(self) -> i64 {
        i64::from(self.to_bits() as i32)
    }
    #[inline]
    fn from_i64(v: i64) -> Option<f32> {
        i32::try_from(v).ok().map(|b| f32::from_bits(b as u32))
    }
    #[inline]
    fn to_word(self) -> u64 {
        u64::from(self.to_bits())
    }
    #[inline]
    fn from_word(w: u64) -> f32 {
        f32::from_bits(w as u32)
    }
}

impl Scalar for f64 {
    const BITS: u32 = 64;
    const TYPE_NAME: &'static str = "DOUBLE";
    #[inline]
    fn to_i64(self) -> i64 {
        self.to_bits() as i64
    }
    #[inline]
    fn from_i64(v: i64) -> Option<f64> {
        Some(f64::from_bits(v as u64))
    }
    #[inline]
    fn to_word(self) -> u64 {
        self.to_bits()
    }
    #[inline]
    fn from_word(w: u64) -> f64 {
        f64::from_bits(w)
    }
}

/// A float column value, for the scaled-decimal codec.
pub(crate) trait Float: Scalar {
    /// The largest decimal scale `k` tried and accepted.
    const SCALE_MAX: u32;
    /// The value, exactly, as f64.
    fn to_f64(self) -> f64;
    /// The value nearest `v`.
    fn from_f64(v: f64) -> Self;
}

impl Float for f32 {
    const SCALE_MAX: u32 = 10;
    #[inline]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    #[inline]
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
}

impl Float for f64 {
    const SCALE_MAX: u32 = 15;
    #[inline]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline]
    fn from_f64(v: f64) -> f64 {
        v
    }
}
