"""tf.nn losses and samplers: nce_loss, sampled_softmax_loss, candidate samplers, CTC,
embedding_lookup_sparse. The code lives in ``nn_loss_sampling`` (samplers, sampled losses,
sparse embedding lookups, log_poisson_loss) and ``nn_loss_ctc`` (CTC loss and decoders)."""
from __future__ import annotations

from ._common import ks  # noqa: F401
from . import nn_loss_sampling  # noqa: F401,E402
from . import nn_loss_ctc  # noqa: F401,E402
