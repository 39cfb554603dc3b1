"""The section "Kernel autoencoders (Laforgue et al. 2019)" of bench/RESULTS.md, written a subsection at a time by
bench/kae.py and bench/kae_molecules.py: its heading, its introduction and the order of its subsections, kept in one
place so that whichever script writes last leaves the same section around the other's subsections."""

HEADING = "## Kernel autoencoders (Laforgue et al. 2019)"
INTRODUCTION = (
    "Laforgue, Clémençon & d'Alché-Buc (2019), \"Autoencoding any data through kernel autoencoders\", with "
    "`rkm.KernelAutoencoder` (bench/kae.py: the 2-D sets and the gradient's speed; bench/kae_molecules.py: the "
    "molecules of section 5.2). Each subsection below was written by its own run; its first line names the command."
)
TOY_TITLE = "### 2-D data (section 5.1, Fig. 3, Appendix C.1): 2-1-2 KAE against PCA and MLP autoencoders"
PERF_TITLE = "### Performance: the adjoint gradient against the paper's Jacobian recursions"
# bench/kae.py's subsections first; any other subsection follows in the order it already has in RESULTS.md.
ORDER = [TOY_TITLE, PERF_TITLE]
