"""Everything that makes a ledger verifiable beyond its hash chain: signed notes and keys, signed
checkpoints, retained and witnessed heads, the notary the recorder signs with, audit and resume, proofs,
the index log, witnesses, offline bundles, grants, erasure and retirement. See ARCHITECTURE.md."""
