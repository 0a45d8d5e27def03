//! Starts the moto AWS emulator on loopback (work in progress).
