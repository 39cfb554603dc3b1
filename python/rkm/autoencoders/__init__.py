"""Kernel autoencoders (Laforgue, Clémençon & d'Alché-Buc 2019): KAE and K²AE."""

from rkm.autoencoders.kae import KernelAutoencoder

__all__ = ["KernelAutoencoder"]
