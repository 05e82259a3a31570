//! The `codes!` macro (exported at the crate root).

/// `codes!`: a C-like enum whose values are wire or register codes, written once as a table: each
/// variant with its code and its text. It gives the enum (`#[repr]` of the code's type), the
/// conversion from a code (`None` for a code the table does not list), the text of each value and the
/// list of all values, so no hand-written `match` on numbers can drift from the enum.
///
/// ```
/// rshmem_ibgda::codes! {
///     /// Colours.
///     #[derive(Debug)]
///     pub enum Colour: u8 [from_u8, name] {
///         Red = 1 => "red",
///         Green = 2 => "green",
///     }
/// }
/// assert_eq!(Colour::from_u8(2), Some(Colour::Green));
/// assert_eq!(Colour::from_u8(3), None);
/// assert_eq!(Colour::Red.name(), "red");
/// assert_eq!(Colour::ALL, &[Colour::Red, Colour::Green]);
/// ```
///
/// The two names in brackets are those of the conversion and of the text (`const fn`s, usable in
/// `no_std` and device code). Further derives come as attributes.
#[macro_export]
macro_rules! codes {
    ($(#[$m:meta])* $vis:vis enum $name:ident: $repr:ident [$from:ident, $text:ident] {
        $($(#[$vm:meta])* $v:ident = $n:literal => $t:expr,)*
    }) => {
        $(#[$m])*
        #[repr($repr)]
        #[derive(Clone, Copy, PartialEq, Eq)]
        $vis enum $name { $($(#[$vm])* $v = $n,)* }
        impl $name {
            /// Every value, in the order of the table.
            #[allow(dead_code)]
            pub const ALL: &'static [$name] = &[$($name::$v,)*];
            /// The value with code `v`, or None for a code the table does not list.
            #[allow(dead_code)]
            #[inline(always)]
            pub const fn $from(v: $repr) -> Option<$name> {
                match v {
                    $($n => Some($name::$v),)*
                    _ => None,
                }
            }
            /// The table's text of the value.
            #[allow(dead_code)]
            pub const fn $text(self) -> &'static str {
                match self {
                    $($name::$v => $t,)*
                }
            }
        }
    };
}
