//! The envelope parser: the members the link judges by, borrowed where it can; every value
//! counted, none kept.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

/// A member that may be missing.
#[derive(Debug, Default)]
pub(super) enum Field<T> {
    #[default]
    Absent,
    Present(T),
}

/// A message's id as far as the link cares.
#[derive(Debug)]
pub(super) enum Id<'a> {
    Number(i64),
    Text(Cow<'a, str>),
    Null,
    /// A float, an integer past i64, a boolean, an array or an object.
    Other,
}

#[derive(Debug)]
pub(super) struct Envelope<'a> {
    pub(super) jsonrpc: Option<Cow<'a, str>>,
    pub(super) id: Field<Id<'a>>,
    pub(super) method: Option<Cow<'a, str>>,
    /// It has a `result` or an `error`.
    pub(super) answer: bool,
}

pub(super) struct EnvelopeSeed<'c> {
    pub(super) counted: &'c Cell<usize>,
    pub(super) limit: usize,
}

impl<'de> DeserializeSeed<'de> for EnvelopeSeed<'_> {
    type Value = Envelope<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Envelope<'de>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EnvelopeSeed<'_> {
    type Value = Envelope<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message (an object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope<'de>, A::Error> {
        let count = Counter {
            counted: self.counted,
            limit: self.limit,
        };
        let mut envelope = Envelope {
            jsonrpc: None,
            id: Field::Absent,
            method: None,
            answer: false,
        };
        let mut seen = [false; 5];
        let mut once = |i: usize, name: &str| {
            if std::mem::replace(&mut seen[i], true) {
                Err(de::Error::custom(format!("duplicate member `{name}`")))
            } else {
                Ok(())
            }
        };
        while let Some(key) = map.next_key::<Text<'de>>()? {
            count.one()?;
            match &*key.0 {
                "jsonrpc" => {
                    once(0, "jsonrpc")?;
                    envelope.jsonrpc = Some(map.next_value::<Text<'de>>()?.0);
                }
                "id" => {
                    once(1, "id")?;
                    envelope.id = Field::Present(map.next_value::<Id<'de>>()?);
                }
                "method" => {
                    once(2, "method")?;
                    envelope.method = Some(map.next_value::<Text<'de>>()?.0);
                }
                "result" | "error" => {
                    once(if &*key.0 == "result" { 3 } else { 4 }, &key.0)?;
                    envelope.answer = true;
                    map.next_value_seed(count)?;
                }
                _ => map.next_value_seed(count)?,
            }
        }
        Ok(envelope)
    }
}

/// Walks any JSON value without keeping it, counting values; past `limit` it fails.
#[derive(Clone, Copy)]
struct Counter<'c> {
    pub(super) counted: &'c Cell<usize>,
    pub(super) limit: usize,
}

impl Counter<'_> {
    fn one<E: de::Error>(&self) -> Result<(), E> {
        let n = self.counted.get() + 1;
        self.counted.set(n);
        if n > self.limit {
            Err(E::custom("too many values"))
        } else {
            Ok(())
        }
    }
}

impl<'de> DeserializeSeed<'de> for Counter<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Counter<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.one()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.one()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.one()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.one()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.one()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.one()
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.one()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.one()?;
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

/// A string, borrowed from the line when it has no escapes.
pub(super) struct Text<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text<'de>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> de::Deserialize<'de> for Id<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Id<'de>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Id<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an id")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Id<'de>, E> {
                Ok(Id::Number(n))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Id<'de>, E> {
                Ok(i64::try_from(n).map_or(Id::Other, Id::Number))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Id<'de>, E> {
                Ok(Id::Other)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Id<'de>, E> {
                Ok(Id::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Id<'de>, E> {
                Ok(Id::Null)
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Id<'de>, E> {
                Ok(Id::Text(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Id<'de>, E> {
                Ok(Id::Text(Cow::Owned(s.to_owned())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Id<'de>, A::Error> {
                while seq.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(Id::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Id<'de>, A::Error> {
                while map
                    .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Id::Other)
            }
        }
        d.deserialize_any(V)
    }
}
