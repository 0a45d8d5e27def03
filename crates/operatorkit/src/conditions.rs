//! Status-condition helpers.
