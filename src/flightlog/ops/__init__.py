"""Operations on whole databases, run by hand: :mod:`.dbcopy` (copy or move a ledger between backends,
verifying both ends and retiring the source) and :mod:`.repair` (salvage a damaged SQLite file into a new
one). Above the write path and the integrity checks; nothing below imports them."""
