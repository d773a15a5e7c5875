"""Public lists of values (letters, US states, ISO 3166 country codes, months, weekdays): where a column's DP
release holds only members of one list, the list's other members are public candidates for its second look.

A code of one letter is one of 26; a two-letter state code one of 56 (the 50 states, DC and five territories); a
two-letter country code one of the 249 of ISO 3166-1 alpha-2 (as the tz database's ``iso3166.tab`` lists them).
These lists are public facts, and which list a column is measured against is read off its first look's DP
release alone (post-processing), so measuring the list's members needs no threshold (``categories``' module
docstring). A lending table's `addr_state` released the dozen states its first look could see and wrote every
other state as `<out-of-domain>` (39% of its values).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PublicList:
    """A public list of values, matched without regard to case, and how many of a column's released values must be
    on it (and on no other list) before its other members become candidates."""

    name: str
    members: tuple[str, ...]
    at_least: int


US_STATE_CODES = tuple("""
AL AK AZ AR CA CO CT DE FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ NM NY NC ND OH OK OR PA
RI SC SD TN TX UT VT VA WA WV WI WY DC PR GU VI AS MP
""".split())

US_STATE_NAMES = (
    "Alabama", "Alaska", "Arizona", "Arkansas", "California", "Colorado", "Connecticut", "Delaware", "Florida",
    "Georgia", "Hawaii", "Idaho", "Illinois", "Indiana", "Iowa", "Kansas", "Kentucky", "Louisiana", "Maine",
    "Maryland", "Massachusetts", "Michigan", "Minnesota", "Mississippi", "Missouri", "Montana", "Nebraska", "Nevada",
    "New Hampshire", "New Jersey", "New Mexico", "New York", "North Carolina", "North Dakota", "Ohio", "Oklahoma",
    "Oregon", "Pennsylvania", "Rhode Island", "South Carolina", "South Dakota", "Tennessee", "Texas", "Utah",
    "Vermont", "Virginia", "Washington", "West Virginia", "Wisconsin", "Wyoming", "District of Columbia",
    "Puerto Rico")

ISO_COUNTRY_CODES = tuple("""
AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ
CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO
FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE
JM JO JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO
MP MQ MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW
PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM
TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW
""".split())

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

PUBLIC_LISTS = (
    PublicList("letters", tuple(string.ascii_uppercase), 1),
    PublicList("US state codes", US_STATE_CODES, 2),
    PublicList("US state names", US_STATE_NAMES, 2),
    PublicList("ISO 3166-1 alpha-2 country codes", ISO_COUNTRY_CODES, 2),
    PublicList("months", MONTHS, 2),
    PublicList("months, three letters", tuple(m[:3] for m in MONTHS), 2),
    PublicList("weekdays", WEEKDAYS, 2),
    PublicList("weekdays, three letters", tuple(d[:3] for d in WEEKDAYS), 2),
)


def _written(members: tuple[str, ...], own: set[str]) -> set[str] | None:
    """The list's members written as the column writes its released values: as listed, where every released
    value is a member as listed ("New York"); else in the one casing the released values share (upper, lower,
    title), where every one is a member in it; None where they are not all members."""
    if own <= set(members):
        return set(members)
    for case in (str.upper, str.lower, str.title):
        if all(v == case(v) for v in own):
            written = {case(member) for member in members}
            return written if own <= written else None
    return None


def list_candidates(categories: Sequence[str]) -> tuple[str, ...]:
    """The other members of the one public list (``PUBLIC_LISTS``) that holds every value a column released, written
    as the column writes them; none where no list, or more than one ("CA" and "IN" are states and countries
    both), holds them, or too few of them (post-processing of a DP release). Blanks around a value are not part
    of it."""
    own = {value.strip() for value in categories}
    if not own:
        return ()
    holding = [written for public in PUBLIC_LISTS
               if len(own) >= public.at_least and (written := _written(public.members, own)) is not None]
    if len(holding) != 1:
        return ()
    return tuple(sorted(holding[0] - own))
