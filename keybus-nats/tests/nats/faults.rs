//! Kills, pauses and restarts of the server under each bridge.
