//! The vocabularies the model's records use: enums whose variants are
//! CloudFormation's words (`CREATE_COMPLETE`, `HOOK`, `FAIL`), each parsed,
//! shown and serialized as its word, and the error of a word none of them
//! knows. Every module of the model names its vocabularies with
//! `status_enum!`; this module imports none of them.

/// A word that is none of a vocabulary's: a status or a kind that the
/// store or a server holds and this Cairn does not know (a newer Cairn
/// wrote it, or the record was edited by hand).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {vocabulary} {word}")]
pub struct UnknownWord {
    /// The vocabulary's type (`StackStatus`, `ResourceStatus`, …).
    pub vocabulary: &'static str,
    pub word: String,
}

macro_rules! status_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident => $text:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),* }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),* }
            }
        }

        impl fmt::Display for $name {
            // `pad`: a width or alignment (`{:<45}`) applies, as to a str.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownWord;
            fn from_str(s: &str) -> Result<Self, UnknownWord> {
                match s {
                    $($text => Ok($name::$variant),)*
                    other => Err(UnknownWord {
                        vocabulary: stringify!($name),
                        word: other.to_string(),
                    }),
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use status_enum;
