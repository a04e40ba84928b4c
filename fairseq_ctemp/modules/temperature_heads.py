"""Output heads that divide logits by a (contextual) temperature and return normalised
log-probabilities over the whole vocabulary (DESIGN.md section 2). Plain nn.Modules.

    softmax head:  log p_t = log_softmax(z_t / tau_t),                z_t = W h_t + b
    MoS head:      log p_t = logsumexp_m(log pi_{t,m} + log_softmax(z_{t,m} / tau_t))
                   pi_t = softmax(W_pi h_t),  z_{t,m} = W tanh(W_m h_t) + b   (Yang et al., 2018)

tau_t comes from a ``ContextualTemperature`` on h_t (or None: tau = 1). All in fp32.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class TemperedSoftmaxHead(nn.Module):
    def __init__(self, input_dim, vocab_size, temperature=None, bias=True):
        super().__init__()
        self.output = nn.Linear(input_dim, vocab_size, bias=bias)
        self.temperature = temperature

    def forward(self, h):
        """h: (..., input_dim) -> (log_probs (..., V) fp32, tau (..., V) or None)."""
        logits = self.output(h).float()
        tau = self.temperature(h) if self.temperature is not None else None
        return F.log_softmax(logits / tau if tau is not None else logits, dim=-1), tau


class MixtureOfSoftmaxesHead(nn.Module):
    def __init__(self, input_dim, vocab_size, n_components=15, latent_dim=None, temperature=None,
                 bias=True):
        super().__init__()
        if int(n_components) != n_components or n_components < 1:
            raise ValueError(f"--mos-components (M) must be an integer >= 1, got {n_components}")
        latent_dim = latent_dim or input_dim
        self.n_components = n_components
        self.prior = nn.Linear(input_dim, n_components, bias=False)
        self.latent = nn.Linear(input_dim, n_components * latent_dim)
        self.output = nn.Linear(latent_dim, vocab_size, bias=bias)
        self.temperature = temperature

    def forward(self, h):
        """h: (..., input_dim) -> (log_probs (..., V) fp32, tau (..., V) or None)."""
        log_prior = F.log_softmax(self.prior(h).float(), dim=-1)               # (..., M)
        latent = torch.tanh(self.latent(h)).view(*h.shape[:-1], self.n_components, -1)
        logits = self.output(latent).float()                                  # (..., M, V)
        tau = self.temperature(h) if self.temperature is not None else None
        if tau is not None:
            logits = logits / tau.unsqueeze(-2)  # one temperature per position, shared by components
        log_probs = torch.logsumexp(log_prior.unsqueeze(-1) + F.log_softmax(logits, dim=-1), dim=-2)
        return log_probs, tau
