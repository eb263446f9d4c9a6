"""What a plug-in that calls an HTTP endpoint declares: the endpoint's URL,
and the one secret it sends there, named in its configuration (never held).

The ``http`` and ``openai_chat`` targets and the ``llm_judge`` scorer declare
their endpoint with these; sending is ``http_client``'s.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, model_validator

from runs.calls.netpolicy import clean_target_url
from runs.errors import ConfigError
from runs.plugins import FieldError, Params, SecretRef, TargetContext
from runs.secrets.store import clean_secret_refs

# The URL a plug-in sends its requests to (the base of every one): http(s)
# only; no userinfo, query or fragment; a host the network policy could ever
# allow (the real check is at connect time).
EndpointURL = Annotated[str, AfterValidator(clean_target_url)]


class SecretParams(Params):
    """Parameters that name the one secret a plug-in sends to its endpoint
    (``secret``), and never hold it."""

    secret: ClassVar[SecretRef]
    # Keys under which a configuration would hold the secret itself, and how
    # the refusal speaks of it ("set the key as a project secret").
    stored_names: ClassVar[tuple[str, ...]]
    stored_as: ClassVar[str]
    noun: ClassVar[str]  # in "the key was not resolved for this project"

    @model_validator(mode="before")
    @classmethod
    def _no_stored_secret(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name in cls.stored_names:
                if name in data:
                    raise FieldError(
                        name,
                        "secrets are never stored in a configuration; set "
                        f"{cls.stored_as} as a project secret and name it in "
                        f"{cls.secret.secret_field}",
                    )
        return data

    def check_secret_names(self) -> None:
        """Inside a model validator: the parameters naming the secret, as
        ``clean_secret_refs`` checks them (an environment variable only if the
        operator lists it, and only to the hosts it is bound to; one message
        whether or not it exists), as an error on the parameter."""
        ref = self.secret
        try:
            clean_secret_refs((ref,), self.model_dump())
        except ConfigError as exc:
            raise FieldError(exc.field or ref.env_field or "", exc.message) from None

    def credential(self, context: TargetContext, *, prefix: str) -> str | None:
        """The header value that carries the secret (after ``prefix``), or
        None when the configuration names none.

        A secret named but not resolved for the project, or one that a header
        cannot carry, is a ConfigError naming the parameter of the secret.
        """
        ref = self.secret
        value = context.secrets.get(ref.key)
        if value:
            value = prefix + value
            if not value.isascii() or not value.isprintable():
                raise ConfigError(
                    f"the {self.noun} holds characters a header cannot carry",
                    field=ref.secret_field,
                )
            return value
        if self.get(ref.secret_field) or (ref.env_field and self.get(ref.env_field)):
            raise ConfigError(
                f"the {self.noun} was not resolved for this project",
                field=ref.secret_field,
            )
        return None


def url_auth(help: str) -> SecretRef:
    """The secret an HTTP target or tool sends with each request to its
    ``url``: named in ``auth_secret`` or ``auth_env``; ``help`` says how."""
    return SecretRef(
        key="auth",
        secret_field="auth_secret",
        env_field="auth_env",
        url_field="url",
        help=help,
    )


class UrlAuthParams(SecretParams):
    """Parameters of a plug-in that sends one secret (``url_auth``) to its URL."""

    stored_names = ("auth", "api_key", "token", "password")
    stored_as = "one"
    noun = "secret"
