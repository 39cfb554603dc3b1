"""
Generating digits and their labels with a Gen-RKM
=================================================

The generative RKM of Pandey, Schreurs & Suykens (2021) is a multi-view kernel PCA: the views of each training
point (here an image and its one-hot label) share s hidden features, the top eigenvectors of the summed centred
kernel matrices (eq. 3). To generate, it draws new hidden features from a Gaussian mixture fitted to the training
ones and decodes them into *every* view at once (eqs. 5-8): one latent gives an image and its label together
(the paper's Fig. 4a). The image view is decoded by the kernel smoother of eq. 8 over the n_r training images
most similar to the latent; the label view, linear, exactly.

This example fits :class:`rkm.GenRKM` on the 1797 8x8 digits of :func:`rkm.datasets.load_digits` (the paper uses
MNIST) with the paper's n_r = 4 neighbours and l = 10 mixture components (Table 4).
"""

# %%
# Fit
# ---
# View 1: the pixels (in [0, 1]) under an rbf kernel exp(-||x - y||^2 / (2 sigma^2)) with sigma = 2, so that
# 2 sigma^2 = 8 is near the median squared distance between two digits (9.3). View 2: the one-hot labels under
# the linear kernel (``gamma=None`` for that view). s = 20 hidden features. The paper's MNIST setting (sigma = 1.3
# on [0, 1] pixels, s = 500) makes the image kernel nearly diagonal, and generation then copies training digits
# or loses the link between image and label; we take the bandwidth at the scale of the distances instead.
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.neighbors import KNeighborsClassifier, NearestNeighbors

import rkm
from rkm.datasets import load_digits
from rkm.kernels import RBF

digits = load_digits()
X, y = digits.data, digits.target
labels_one_hot = np.eye(10)[y]
gamma = RBF.from_sigma(2.0, convention="gaussian").gamma

model = rkm.GenRKM(20, gamma=(gamma, None), n_neighbors=4, n_mixture=10, random_state=0)
start = time.perf_counter()
model.fit([X, labels_one_hot])
print(f"fit on {len(X)} digits and their labels: {time.perf_counter() - start:.2f} s; s = {model.H_.shape[1]}")

# %%
# Generate
# --------
# ``sample(n)`` draws n latents from the mixture and decodes both views: images, and label scores whose argmax is
# the generated class. To check that image and label go together, a 5-nearest-neighbour classifier trained on
# the real digits labels the generated images ("label consistency"); to check that the model does not just copy
# training digits, we count the distinct nearest training images of the samples.
images, scores = model.sample(300, random_state=0)
generated_labels = scores.argmax(axis=1)
classifier = KNeighborsClassifier(5).fit(X, y)
nearest = NearestNeighbors(n_neighbors=1).fit(X)


def quality(images, generated_labels):
    consistency = np.mean(classifier.predict(images) == generated_labels)
    distinct = np.unique(nearest.kneighbors(images)[1]).size
    return consistency, distinct


consistency, distinct = quality(images, generated_labels)
print(f"300 samples: label consistency {consistency:.0%}, {distinct} distinct nearest training digits")
print("samples per generated class:", np.bincount(generated_labels, minlength=10))

fig, axes = plt.subplots(6, 10, figsize=(10, 7))
for ax, image, label in zip(axes.ravel(), images, generated_labels):
    ax.imshow(image.reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
    ax.set_title(f"label {label}", fontsize=9)
    ax.axis("off")
fig.suptitle(f"Gen-RKM: 60 digits generated together with their labels (label consistency {consistency:.0%})")
fig.tight_layout()

# %%
# Generated digits are new images, not copies: each generated digit (top) against its nearest training digit
# (bottom).
_, index = nearest.kneighbors(images[:10])
fig, axes = plt.subplots(2, 10, figsize=(10, 2.6))
for column in range(10):
    axes[0, column].imshow(images[column].reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
    axes[1, column].imshow(X[index[column, 0]].reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
    axes[0, column].set_title(f"label {generated_labels[column]}", fontsize=9)
for ax in axes.ravel():
    ax.set_xticks([])
    ax.set_yticks([])
axes[0, 0].set_ylabel("generated")
axes[1, 0].set_ylabel("nearest\ntraining")
fig.tight_layout()

# %%
# Consistency against diversity
# -----------------------------
# More hidden features let the samples vary more, but the extra components, drawn from the mixture, pull the
# smoother's neighbours away from the generated label. The project's MNIST study found the same trade-off.
n_components = [5, 10, 20, 30, 80]
rows = []
for s in n_components:
    fitted = rkm.GenRKM(s, gamma=(gamma, None), n_neighbors=4, n_mixture=10, random_state=0)
    fitted.fit([X, labels_one_hot])
    sampled_images, sampled_scores = fitted.sample(300, random_state=0)
    rows.append(quality(sampled_images, sampled_scores.argmax(axis=1)))
    print(f"s = {s:3d}: label consistency {rows[-1][0]:.0%}, {rows[-1][1]} distinct nearest training digits")

rows = np.array(rows)
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(n_components, rows[:, 0], "o-", color="tab:blue")
ax.set(xscale="log", xlabel="hidden features s", title="Gen-RKM on the digits: 300 samples per model")
ax.set_ylabel("label consistency", color="tab:blue")
twin = ax.twinx()
twin.plot(n_components, rows[:, 1], "s--", color="tab:orange")
twin.set_ylabel("distinct nearest training digits", color="tab:orange")
fig.tight_layout()
plt.show()
