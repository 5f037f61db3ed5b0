//! Names for enums picked on command lines and shown in reports: one macro,
//! [`named_enum!`](crate::named_enum), writes an enum's `ALL`, `name()`,
//! `Display` and (optionally) `FromStr` from one table of variants and
//! names, so the name that parses is always the name that prints.
//!
//! It is a macro rather than a trait because `Display` and `FromStr` are
//! foreign traits: a blanket `impl<T: Named> Display for T` is not allowed,
//! and an inherent `const ALL: [Self; N]` keeps arrays (iterated by value)
//! where a trait constant could only offer a slice.

/// Writes, for a fieldless enum, `pub const ALL` (every variant, in the
/// order given), `pub const fn name(self)`, `Display` (the name) and, when
/// `unknown: Error = constructor` is given, `FromStr` (a name of `ALL`, or
/// `Err(constructor(name.to_owned()))`).
///
/// ```
/// #[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// enum Fruit {
///     Apple,
///     Kiwi,
/// }
///
/// #[derive(Debug, PartialEq, Eq)]
/// struct UnknownFruit(String);
///
/// memcg::named_enum!(Fruit {
///     Apple => "apple",
///     Kiwi => "kiwi",
/// }, unknown: UnknownFruit = UnknownFruit);
///
/// assert_eq!(Fruit::ALL, [Fruit::Apple, Fruit::Kiwi]);
/// assert_eq!(Fruit::Kiwi.to_string(), "kiwi");
/// assert_eq!("apple".parse(), Ok(Fruit::Apple));
/// assert_eq!("fig".parse::<Fruit>(), Err(UnknownFruit("fig".into())));
/// ```
#[macro_export]
macro_rules! named_enum {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// Every variant, in the order reports list them.
            pub const ALL: [$ty; [$($name),+].len()] = [$($ty::$variant),+];

            /// The name used on command lines and in reports.
            pub const fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }
        }

        impl ::core::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }, unknown: $err:ty = $unknown:expr) => {
        $crate::named_enum!($ty { $($variant => $name),+ });

        impl ::core::str::FromStr for $ty {
            type Err = $err;

            fn from_str(name: &str) -> ::core::result::Result<Self, Self::Err> {
                $ty::ALL
                    .into_iter()
                    .find(|v| v.name() == name)
                    .ok_or_else(|| ($unknown)(name.to_owned()))
            }
        }
    };
}
