"""The error codes more than one part of the server uses, each declared here once with its one recovery
hint.

A code is public (``docs/server.md`` lists them): add codes, never rename one. The server's core raises the
generic codes; the codes several domains raise (``invalid_smiles``, ``unsupported_element`` …) live here too,
so a hint does not depend on which domain was loaded first. A domain declares only the codes that are its
own (``tools_server.core.domain.Domain``); declaring one of these again with another hint is refused. A
raise site that knows better (which elements the method covers) passes its own ``hint``.
"""

from __future__ import annotations

#: code -> default recovery hint shown to the model when the raiser gives none
SHARED_ERROR_CODES: dict[str, str] = {
    # generic: the server's core and any tool
    "invalid_input": "Check the arguments against the tool's input schema and try again.",
    "too_large": "Split the input into smaller batches or shorten it.",
    "engine_unavailable": "Install the missing engine (see `spu doctor`) or choose another method.",
    "engine_crashed": "The engine process died; the server is fine. Retry with smaller input, fewer "
    "threads, or another method.",
    "timeout": "Raise time_limit_s, shrink the job, or choose a cheaper method.",
    "cancelled": "The job was cancelled; submit it again if it is still needed.",
    "not_converged": "Retry with looser thresholds, more iterations or a different starting geometry.",
    "engine_error": "The engine returned an unusable result (NaN or infinity): check the structure (no "
    "atoms on top of each other, sensible distances), optimise it with a cheaper method first, or use "
    "another method.",
    "job_not_found": "List jobs with the `jobs` tool; job ids are printed when a job starts.",
    "unknown_tool": "List the available tools; the name may be misspelled.",
    "internal_error": "This is a bug in the tool server; report it with the job id.",
    "storage_error": "The server could not write to its disk (full, over quota, read-only or failing): "
    "tell the operator to free space or make the folder writable, then call again.",
    # shared by several domains (molecules, proteins, model weights)
    "invalid_smiles": "Check the SMILES string (valences, ring closures, brackets) or pass a molblock.",
    "charge_multiplicity_mismatch": "Check the total charge and the spin multiplicity (2S+1): an even "
    "number of electrons needs an odd multiplicity and vice versa.",
    "unsupported_element": "Use a method that supports this element (the message names the elements this "
    "one covers): GFN2-xTB (xtb_run) covers H-Rn, and a DFT basis set must define it.",
    "weights_missing": "Place the model weights in SPU_WEIGHTS_DIR (see docs/weights.md) or allow the "
    "download.",
    "invalid_structure": "Two or more atoms sit at one point (closer than 0.1 Å): check the coordinates "
    "(units in Å, no duplicated lines) or rebuild the structure from a SMILES.",
    "no_protein": "Give a PDB file of a protein (ATOM records of standard amino acids), e.g. from "
    "pdb_lookup.",
}
