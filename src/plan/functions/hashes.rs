//! Flink's hash functions of a string: `SHA1(s)`, `SHA224(s)`, `SHA256(s)`, `SHA384(s)`,
//! `SHA512(s)` and `SHA2(s, bits)` (224, 256, 384 or 512) are the digest of the string's UTF-8
//! bytes as lower-case hexadecimal digits, a STRING (Flink's `SqlFunctionUtils.hash`, then
//! `EncodingUtils.hex`). `MD5(s)` is DataFusion's, which already is.
//!
//! Of BYTES the SHA-2 functions are Postgres's (`sha256(bytea)`): the digest itself, BYTES, as
//! DataFusion computed them before this replaced them. NULL in, NULL out; `SHA2` with another
//! number of bits is an error, as in Flink (`NoSuchAlgorithmException`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryBuilder, StringBuilder};
use arrow::datatypes::DataType;
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};
use sha1::Digest;

use super::args::{as_integer_type, as_string_type, num_rows, IntArg};

/// A digest's algorithm; `None` bits: `SHA2`, whose second argument chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Algorithm {
    Sha1,
    Sha2(Option<u16>),
}

/// One of the functions of this module.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Sha {
    signature: Signature,
    algorithm: Algorithm,
    name: &'static str,
}

impl Sha {
    /// Every function of this module.
    pub(super) fn all() -> Vec<Self> {
        [
            (Algorithm::Sha1, "sha1"),
            (Algorithm::Sha2(Some(224)), "sha224"),
            (Algorithm::Sha2(Some(256)), "sha256"),
            (Algorithm::Sha2(Some(384)), "sha384"),
            (Algorithm::Sha2(Some(512)), "sha512"),
            (Algorithm::Sha2(None), "sha2"),
        ]
        .into_iter()
        .map(|(algorithm, name)| Self { signature: Signature::user_defined(Volatility::Immutable), algorithm, name })
        .collect()
    }
}

/// The digest of `bytes` by `algorithm` with `bits`; `None` for bits SHA-2 does not have.
fn digest(algorithm: Algorithm, bits: u16, bytes: &[u8]) -> Option<Vec<u8>> {
    Some(match (algorithm, bits) {
        (Algorithm::Sha1, _) => sha1::Sha1::digest(bytes).to_vec(),
        (_, 224) => sha2::Sha224::digest(bytes).to_vec(),
        (_, 256) => sha2::Sha256::digest(bytes).to_vec(),
        (_, 384) => sha2::Sha384::digest(bytes).to_vec(),
        (_, 512) => sha2::Sha512::digest(bytes).to_vec(),
        _ => return None,
    })
}

impl ScalarUDFImpl for Sha {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let usage = if self.algorithm == Algorithm::Sha2(None) { "SHA2(string, bits)".to_string() } else { format!("{}(string)", self.name.to_uppercase()) };
        let arity = if self.algorithm == Algorithm::Sha2(None) { 2 } else { 1 };
        if arg_types.len() != arity {
            return plan_err!("{usage}: wrong number of arguments ({})", arg_types.len());
        }
        let value = match &arg_types[0] {
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => DataType::Binary,
            t => match as_string_type(t) {
                Some(s) => s,
                None => return plan_err!("{usage}: expected a string or BYTES, got {t}"),
            },
        };
        let mut out = vec![value];
        if let Some(bits) = arg_types.get(1) {
            match as_integer_type(bits) {
                Some(i) => out.push(i),
                None => return plan_err!("{usage}: the number of bits must be an integer, got {bits}"),
            }
        }
        Ok(out)
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(if arg_types.first() == Some(&DataType::Binary) { DataType::Binary } else { DataType::Utf8 })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = num_rows(&args.args);
        let values = args.args[0].to_array(n)?;
        let bits = match (self.algorithm, args.args.get(1)) {
            (Algorithm::Sha2(None), Some(b)) => IntArg::new(b)?,
            (Algorithm::Sha2(Some(bits)), _) => IntArg::Const(Some(i64::from(bits))),
            _ => IntArg::Const(Some(160)),
        };
        let bytes_of = |i: usize| -> Option<&[u8]> {
            if values.is_null(i) {
                return None;
            }
            match values.data_type() {
                DataType::Binary => Some(values.as_binary::<i32>().value(i)),
                DataType::Utf8 => Some(values.as_string::<i32>().value(i).as_bytes()),
                _ => None,
            }
        };
        let mut digests: Vec<Option<Vec<u8>>> = Vec::with_capacity(n);
        for i in 0..n {
            let (Some(bytes), Some(bits)) = (bytes_of(i), bits.get(i)) else {
                digests.push(None);
                continue;
            };
            match u16::try_from(bits).ok().and_then(|b| digest(self.algorithm, b, bytes)) {
                Some(d) => digests.push(Some(d)),
                None => return exec_err!("SHA2: no SHA-2 digest has {bits} bits (224, 256, 384 or 512)"),
            }
        }
        let out: ArrayRef = if values.data_type() == &DataType::Binary {
            let mut out = BinaryBuilder::with_capacity(n, 0);
            for d in digests {
                out.append_option(d);
            }
            Arc::new(out.finish())
        } else {
            let mut out = StringBuilder::with_capacity(n, 0);
            for d in digests {
                out.append_option(d.map(|d| d.iter().map(|b| format!("{b:02x}")).collect::<String>()));
            }
            Arc::new(out.finish())
        };
        Ok(ColumnarValue::Array(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(algorithm: Algorithm, bits: u16, s: &str) -> String {
        digest(algorithm, bits, s.as_bytes()).unwrap().iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn digests_are_the_published_ones() {
        // FIPS 180's examples for "abc".
        assert_eq!(hex(Algorithm::Sha1, 160, "abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(hex(Algorithm::Sha2(None), 256, "abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(&hex(Algorithm::Sha2(None), 224, "abc")[..16], "23097d223405d822");
        assert!(digest(Algorithm::Sha2(None), 100, b"abc").is_none());
    }
}
