"""Xyro's configuration: one immutable :class:`XyroConfig`, its sections and their value
types.

Every key is documented, with its default and unit, in ``config/xyro.yaml`` (which loads to
exactly the defaults below; a test keeps the two in step).

Typing is strict: a value must be written as what it is. ``workers: "8"`` is an error (a
quoted 8 is text), ``user_agent: no`` is an error (YAML 1.1 reads ``no`` as false), and
``workers: 8.0`` is an error (not a whole number); a whole number is fine where a float is
wanted. Building it from defaults < file < XYRO_* < --set, and the errors a user sees, is
:mod:`xyro.config_load`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, \
    model_validator
from pydantic_core import PydanticCustomError

from xyro.media_types import DEFAULT_ACCEPT_CONTENT_TYPES, DEFAULT_SKIP_SUFFIXES

#: The longest duration a key takes (ten years): a timer or a deadline past it overflows
#: the scheduler's and the clock's arithmetic, and no crawl needs more.
MAX_SECONDS = 315_360_000
#: The largest size in bytes a key takes (1 TiB), and the largest count (of pages, entries):
#: every integer key has a bound, so no value passes validation to overflow a C integer
#: (a deque's length, an SQLite parameter) later, with a traceback.
MAX_BYTES = 2**40
MAX_COUNT = 10**12
#: The longest refresh interval in time units (a unit of one second: 11 days; of a day:
#: 2,700 years).
MAX_UNITS = 1_000_000

# --- value types -------------------------------------------------------------------------

def _invalid(message: str) -> PydanticCustomError:
    # No context given, so pydantic leaves braces in the text alone (regexes have them).
    return PydanticCustomError("xyro_value", message)


def _http_url(value: str) -> str:
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:
        host, parts = None, None
    if parts is None or parts.scheme not in ("http", "https") or not host \
            or any(ch.isspace() or ord(ch) < 32 for ch in value):
        raise _invalid(f"must be an http:// or https:// URL with a host, got {value!r}")
    return value


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise _invalid(f"is not a valid regular expression ({exc}): {value!r}") from None
    return value


def _matching(pattern: str, wanted: str,
              normalize: Callable[[str], str] = str) -> AfterValidator:
    """A text check: the normalized value must match ``pattern`` in full."""
    compiled = re.compile(pattern, re.DOTALL)

    def check(value: str) -> str:
        norm = normalize(value)
        if not compiled.fullmatch(norm):
            raise _invalid(f"must be {wanted}, got {value!r}")
        return norm
    return AfterValidator(check)


_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_TOKEN = r"[a-z0-9!#$&^_.+-]+"
def _list_to_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


_LISTEN = re.compile(r"(?:\[(?P<v6>[^\]]+)\]|(?P<v4>[^:\[\]]+)):(?P<port>[0-9]{1,5})")


def split_listen(value: str) -> tuple[str, int]:
    """``127.0.0.1:9464`` → ``("127.0.0.1", 9464)``, ``[::1]:0`` → ``("::1", 0)``.

    An IP address, never a host name: the endpoint binds exactly what is written (no DNS at
    start, no name that resolves elsewhere later). ValueError for anything else.
    """
    match = _LISTEN.fullmatch(value)
    if match is None:
        raise ValueError(value)
    host, port = match["v6"] or match["v4"], int(match["port"])
    address = ipaddress.ip_address(host)  # ValueError for a host name
    if (match["v6"] is not None) != (address.version == 6) or port > 65535:
        raise ValueError(value)
    return host, port


def _empty_is_off(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


def _listen(value: str | None) -> str | None:
    if value is not None:
        try:
            split_listen(value)
        except ValueError:
            raise _invalid("must be IP:PORT like 127.0.0.1:9464 or [::1]:9464 (an IP address, "
                           "not a host name; port 0..65535, 0 = any free port), or empty for "
                           f"off; got {value!r}") from None
    return value


_CLUSTER = re.compile(r"(?P<scheme>tcp|tls)://(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|"
                      r"(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?))"
                      r":(?P<port>[0-9]{1,5})")


def split_cluster(value: str) -> tuple[str, str, int]:
    """``tcp://sched.example:8786`` → ``("tcp", "sched.example", 8786)``; a Dask scheduler
    address: tcp:// or tls://, a host name or IP ([...] for IPv6), a port 1..65535.
    ValueError for anything else."""
    match = _CLUSTER.fullmatch(value)
    if match is None or not 1 <= int(match["port"]) <= 65535:
        raise ValueError(value)
    if match["v6"] is not None:
        ipaddress.IPv6Address(match["v6"])  # ValueError when not an IPv6 address
    return match["scheme"], match["v6"] or match["host"], int(match["port"])


def cluster_address(value: str | None) -> str | None:
    if value is not None:
        try:
            split_cluster(value)
        except ValueError:
            raise _invalid("must be a Dask scheduler address like tcp://host:8786 (tcp:// or "
                           "tls://, a host name or IP address, [...] for IPv6, a port "
                           f"1..65535), or empty for one host; got {value!r}") from None
    return value


HttpUrl = Annotated[str, AfterValidator(_http_url)]
# Empty text (an environment variable or --set with nothing after "=") means off, like null.
ListenAddress = Annotated[str | None, BeforeValidator(_empty_is_off), AfterValidator(_listen)]
ClusterAddress = Annotated[str | None, BeforeValidator(_empty_is_off),
                          AfterValidator(cluster_address)]
Regex = Annotated[str, AfterValidator(_regex)]
Domain = Annotated[str, _matching(
    rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*", "a host name like example.org (its "
    "subdomains are included; no scheme, port, path or wildcard)",
    lambda host: host.lower().rstrip("."))]
Suffix = Annotated[str, _matching(r"\.[a-z0-9._+-]+", "a file-name ending that starts "
                                  "with a dot, like .jpg", str.lower)]
_PATTERN_TOKEN = r"[a-z0-9!#$&^_.+*-]+"   # a token, or fnmatch's * wildcard in it
MediaType = Annotated[str, _matching(f"{_PATTERN_TOKEN}/{_PATTERN_TOKEN}", "a media type like "
                                     "text/html or a pattern like */*+xml (no parameters)",
                                     str.lower)]
HeaderText = Annotated[str, _matching(r"[!-~](?:[ -~]*[!-~])?", "printable ASCII on one "
                                      "line without leading or trailing spaces (it goes into "
                                      "an HTTP header)")]
FilePath = Annotated[str, _matching(r"[^\0]*\S[^\0]*", "a file-system path")]
# Tuples keep the config hashable; YAML lists (and Python lists) are accepted as input.
Urls = Annotated[tuple[HttpUrl, ...], BeforeValidator(_list_to_tuple)]
Domains = Annotated[tuple[Domain, ...], BeforeValidator(_list_to_tuple)]
Regexes = Annotated[tuple[Regex, ...], BeforeValidator(_list_to_tuple)]
Suffixes = Annotated[tuple[Suffix, ...], BeforeValidator(_list_to_tuple)]
MediaTypes = Annotated[tuple[MediaType, ...], BeforeValidator(_list_to_tuple)]
FilePaths = Annotated[tuple[FilePath, ...], BeforeValidator(_list_to_tuple)]


def _require_le(section: BaseModel, low: str, high: str) -> None:
    """Cross-field rule ``low ≤ high`` (dotted names relative to ``section``)."""
    low_value, high_value = _attr(section, low), _attr(section, high)
    if low_value > high_value:
        raise PydanticCustomError("xyro_order", "{low} must not exceed {high}", {
            "low": low, "high": high, "low_value": low_value, "high_value": high_value})


def _attr(obj: Any, dotted: str) -> Any:
    for name in dotted.split("."):
        obj = getattr(obj, name)
    return obj


# --- the model ---------------------------------------------------------------------------

class _Section(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", allow_inf_nan=False)


class ScopeConfig(_Section):
    allowed_domains: Domains = ()
    denied_domains: Domains = ()
    allow_patterns: Regexes = ()
    deny_patterns: Regexes = ()
    max_depth: int = Field(16, ge=0, le=10_000)
    allow_private_addresses: bool = False


class PolitenessConfig(_Section):
    delay_s: float = Field(5.0, ge=0, le=MAX_SECONDS)
    max_crawl_delay_s: float = Field(60.0, ge=0, le=MAX_SECONDS)
    robots_ttl_s: float = Field(86400.0, gt=0, le=86400)   # RFC 9309 §2.4: at most 24 h
    robots_unreachable_retry_s: float = Field(3600.0, gt=0, le=MAX_SECONDS)
    max_retry_after_s: float = Field(3600.0, ge=0, le=MAX_SECONDS)


class LimitsConfig(_Section):
    connect_timeout_s: float = Field(10.0, gt=0, le=MAX_SECONDS)
    read_timeout_s: float = Field(30.0, gt=0, le=MAX_SECONDS)
    deadline_s: float = Field(60.0, gt=0, le=MAX_SECONDS)
    dns_timeout_s: float = Field(5.0, gt=0, le=MAX_SECONDS)
    dns_cache_ttl_s: float = Field(3600.0, ge=0, le=MAX_SECONDS)
    max_body_bytes: int = Field(10 * 2**20, ge=1, le=MAX_BYTES)
    max_decoded_bytes: int = Field(50 * 2**20, ge=1, le=MAX_BYTES)
    max_redirects: int = Field(5, ge=0, le=20)
    max_url_length: int = Field(2048, ge=16, le=2**20)

    @model_validator(mode="after")
    def _ordered(self) -> LimitsConfig:
        for timeout in ("connect_timeout_s", "read_timeout_s", "dns_timeout_s"):
            _require_le(self, timeout, "deadline_s")
        _require_le(self, "max_body_bytes", "max_decoded_bytes")
        return self


class TrapsConfig(_Section):
    max_pages_per_host_per_unit: int = Field(100_000, ge=1, le=MAX_COUNT)
    max_repeated_segments: int = Field(3, ge=1, le=1000)
    max_query_params: int = Field(12, ge=0, le=10_000)


class CrawlerConfig(_Section):
    user_agent: HeaderText = "Xyro/0.1"
    contact_url: HttpUrl = "https://example.invalid/xyro-crawler"
    workers: int = Field(64, ge=1, le=4096)
    follow_nofollow: bool = False
    dead_after_404s: int = Field(3, ge=1, le=1000)
    expected_urls: int = Field(10_000_000, ge=1, le=10**12)
    seen_set_false_positive_rate: float = Field(0.001, gt=0, lt=1)
    cpus: list[Annotated[int, Field(ge=0)]] | None = Field(None, min_length=1)
    politeness: PolitenessConfig = PolitenessConfig()
    limits: LimitsConfig = LimitsConfig()
    traps: TrapsConfig = TrapsConfig()
    skip_suffixes: Suffixes = DEFAULT_SKIP_SUFFIXES
    accept_content_types: MediaTypes = Field(DEFAULT_ACCEPT_CONTENT_TYPES, min_length=1)


class RefreshConfig(_Section):
    # below a second, unit numbers overflow
    time_unit_s: float = Field(86400.0, ge=1, le=MAX_SECONDS)
    bandwidth_pages_per_unit: int = Field(100_000, ge=1, le=10**12)  # SQLite's integers
    discovery_share: float = Field(0.2, ge=0, le=1)
    min_interval_units: int = Field(1, ge=1, le=MAX_UNITS)
    max_interval_units: int = Field(90, ge=1, le=MAX_UNITS)
    importance_floor: float = Field(0.0, ge=0)
    importance_source: Literal["rank", "importance", "uniform"] = "rank"
    policy: Literal["planner", "uniform", "change_proportional"] = "planner"

    @model_validator(mode="after")
    def _ordered(self) -> RefreshConfig:
        _require_le(self, "min_interval_units", "max_interval_units")
        return self


class PublicationConfig(_Section):
    """Sitemaps and feeds, the push channel (003 §3), and when their dates are believed
    (:class:`xyro.publication.trust.PublishedDateTrust`, DESIGN.md §6)."""

    refresh_s: float = Field(86400.0, gt=0, le=MAX_SECONDS)
    trust_window: int = Field(50, ge=1, le=1_000_000)
    trust_min_observations: int = Field(5, ge=1, le=1_000_000)
    trust_max_disagreement: float = Field(0.2, ge=0, lt=1)
    trust_tolerance_s: float = Field(2.0, ge=0, le=MAX_SECONDS)

    @model_validator(mode="after")
    def _ordered(self) -> PublicationConfig:
        _require_le(self, "trust_min_observations", "trust_window")
        return self


class OpicFocusConfig(_Section):
    xml: bool = True
    patterns: Regexes = ()
    boost: float = Field(1.0, ge=0)


class OpicConfig(_Section):
    enabled: bool = True
    estimate: Literal["inflow", "papers", "fixed_window", "variable_window", "bao"] = "inflow"
    checkpoint_interval_s: float = Field(300.0, gt=0, le=MAX_SECONDS)
    focus: OpicFocusConfig = OpicFocusConfig()


#: The most selection rounds of a global PageRank estimate (config and command line alike).
MAX_GLOBAL_ROUNDS = 10_000


class GlobalEstimateConfig(_Section):
    """The daemon's global PageRank estimate of a scoped warehouse (DESIGN.md §5, 001)."""

    enabled: bool = False
    extra_pages_per_local_page: float = Field(2.0, gt=0, le=100)
    rounds: int = Field(50, ge=1, le=MAX_GLOBAL_ROUNDS)
    selector: Literal["sc", "sc_learned", "pf", "outlinks", "random"] = "sc_learned"
    out_degree: Literal["within", "all"] = "within"
    check_interval_s: float = Field(300.0, gt=0, le=MAX_SECONDS)
    importance: Literal["local", "global"] = "local"


class RankingConfig(_Section):
    importance: Literal["pagerank", "opic"] = "pagerank"
    opic: OpicConfig = OpicConfig()
    global_estimate: GlobalEstimateConfig = GlobalEstimateConfig()
    damping: float = Field(0.85, gt=0, lt=1)
    tolerance: float = Field(1e-8, gt=0, lt=1)
    max_iter: int = Field(1000, ge=1, le=1_000_000)
    dangling: Literal["paper", "teleport"] = "paper"
    interest_teleport: Literal["uniform_xml", "xml_importance"] = "uniform_xml"
    schedule_s: float = Field(86400.0, gt=0, le=MAX_SECONDS)
    memory_budget_mb: int = Field(1024, ge=1, le=MAX_BYTES // 2**20)
    cluster: ClusterAddress = None
    cluster_dir: FilePath | None = None
    cluster_timeout_s: float = Field(10.0, gt=0, le=MAX_SECONDS)

    @model_validator(mode="after")
    def _one_importance_writer(self) -> RankingConfig:
        if self.global_estimate.importance == "global" and self.importance == "opic":
            raise PydanticCustomError("xyro_key", "{reason}", {
                "key": "global_estimate", "reason": (
                    "importance: global makes the estimate the importance of in-scope pages, "
                    "but ranking.importance is opic, whose checkpoints write importance too; "
                    "set ranking.importance: pagerank, or global_estimate.importance: local")})
        return self


class LoaderConfig(_Section):
    # Defaults: those of xyro.loader.settings.LoaderSettings, measured in config/xyro.yaml.
    max_document_bytes: int = Field(8 * 2**20, ge=1, le=MAX_BYTES)
    dtd_timeout_s: float = Field(600.0, gt=0, le=MAX_SECONDS)
    versions_per_url: int = Field(10, ge=1, le=1_000_000)
    dtd_validation: bool = True
    max_entity_bytes: int = Field(2 * 2**20, ge=1, le=MAX_BYTES)
    max_cached_entities: int = Field(1000, ge=1, le=MAX_COUNT)
    max_cache_bytes: int = Field(256 * 2**20, ge=1, le=MAX_BYTES)
    max_entity_urls: int = Field(128, ge=1, le=1_000_000)
    max_pending_bytes: int = Field(256 * 2**20, ge=0, le=MAX_BYTES)
    max_expansion_factor: float = Field(10.0, ge=1.0)
    max_attributes_per_element: int = Field(512, ge=1, le=1_000_000)
    max_namespaces_in_scope: int = Field(128, ge=1, le=1_000_000)
    # None: the system catalog (/etc/xml/catalog) when it exists; [] turns catalogs off.
    catalogs: FilePaths | None = None

    @model_validator(mode="after")
    def _cache_holds_a_document(self) -> LoaderConfig:
        # A document draws up to max_document_bytes of DTDs and entities from the cache and
        # loads only once all of them are in it at the same time.
        _require_le(self, "max_document_bytes", "max_cache_bytes")
        return self


class StorageConfig(_Section):
    database: FilePath = "var/xyro.db"
    warehouse_dir: FilePath = "var/warehouse"
    fsync: bool = True


class LogConfig(_Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["text", "json"] = "text"
    summary_interval_s: float = Field(60.0, gt=0, le=MAX_SECONDS)
    host_warning_interval_s: float = Field(600.0, ge=0, le=MAX_SECONDS)


class MetricsConfig(_Section):
    """The Prometheus endpoint (:mod:`xyro.service.metrics`): off unless ``listen`` is given."""

    listen: ListenAddress = None
    allow_non_loopback: bool = False

    @model_validator(mode="after")
    def _loopback_only(self) -> MetricsConfig:
        # prometheus-client binds whatever it is given and /metrics has no authentication
        # (DESIGN.md §8): beyond loopback only when the operator says so.
        address = self.address
        if address is not None and not self.allow_non_loopback \
                and not ipaddress.ip_address(address[0]).is_loopback:
            raise PydanticCustomError("xyro_key", "{reason}", {"key": "listen", "reason": (
                f"{address[0]} is not a loopback address: /metrics has no authentication and "
                "would be open to the network; listen on 127.0.0.1 or [::1], or set "
                "metrics.allow_non_loopback: true if that network is trusted")})
        return self

    @property
    def address(self) -> tuple[str, int] | None:
        """(IP, port) to bind, or None when metrics are off."""
        return None if self.listen is None else split_listen(self.listen)


class XyroConfig(_Section):
    """The whole configuration: frozen and hashable, handed to components at construction."""

    seeds: Urls = ()
    sitemaps: Urls = ()
    scope: ScopeConfig = ScopeConfig()
    crawler: CrawlerConfig = CrawlerConfig()
    refresh: RefreshConfig = RefreshConfig()
    publication: PublicationConfig = PublicationConfig()
    ranking: RankingConfig = RankingConfig()
    loader: LoaderConfig = LoaderConfig()
    storage: StorageConfig = StorageConfig()
    log: LogConfig = LogConfig()
    metrics: MetricsConfig = MetricsConfig()

    @model_validator(mode="after")
    def _ordered(self) -> XyroConfig:
        # The loader only ever sees what the fetcher decoded.
        _require_le(self, "loader.max_document_bytes", "crawler.limits.max_decoded_bytes")
        return self

    def dump_yaml(self) -> str:
        """The effective configuration as YAML (``xyro config show``); it loads back equal."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False,
                              allow_unicode=True, default_flow_style=False)
