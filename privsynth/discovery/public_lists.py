"""Public lists of values: the partner of a value that comes in a public pair (yes / no, true / false, male /
female ...), and lists (letters, US states, ISO 3166 country codes and names, months, weekdays): where a column's
DP release holds members of one list (80% of its values), the list's other members are public candidates for its
second look.

A code of one letter is one of 26; a two-letter state code one of 56 (the 50 states, DC and five territories); a
country code one of the 249 of ISO 3166-1, alpha-2 or alpha-3, and a country's name one of their names or common
names (as Debian's iso-codes lists them, from iso.org).
These lists are public facts, and which list a column is measured against is read off its first look's DP
release alone (post-processing), so measuring the list's members needs no threshold (``categories``' module
docstring). A lending table's `addr_state` released the dozen states its first look could see and wrote every
other state as `<out-of-domain>` (39% of its values).
"""

from __future__ import annotations

import functools
import string
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PublicList:
    """A public list of values (matched as listed, or in the one casing a column writes), and how many of a
    column's released values must be on it before its other members become candidates."""

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

ISO_COUNTRY_CODES_3 = tuple("""
ABW AFG AGO AIA ALA ALB AND ARE ARG ARM ASM ATA ATF ATG AUS AUT AZE BDI BEL BEN BES BFA BGD BGR BHR BHS BIH BLM
BLR BLZ BMU BOL BRA BRB BRN BTN BVT BWA CAF CAN CCK CHE CHL CHN CIV CMR COD COG COK COL COM CPV CRI CUB CUW CXR
CYM CYP CZE DEU DJI DMA DNK DOM DZA ECU EGY ERI ESH ESP EST ETH FIN FJI FLK FRA FRO FSM GAB GBR GEO GGY GHA GIB
GIN GLP GMB GNB GNQ GRC GRD GRL GTM GUF GUM GUY HKG HMD HND HRV HTI HUN IDN IMN IND IOT IRL IRN IRQ ISL ISR ITA
JAM JEY JOR JPN KAZ KEN KGZ KHM KIR KNA KOR KWT LAO LBN LBR LBY LCA LIE LKA LSO LTU LUX LVA MAC MAF MAR MCO MDA
MDG MDV MEX MHL MKD MLI MLT MMR MNE MNG MNP MOZ MRT MSR MTQ MUS MWI MYS MYT NAM NCL NER NFK NGA NIC NIU NLD NOR
NPL NRU NZL OMN PAK PAN PCN PER PHL PLW PNG POL PRI PRK PRT PRY PSE PYF QAT REU ROU RUS RWA SAU SDN SEN SGP SGS
SHN SJM SLB SLE SLV SMR SOM SPM SRB SSD STP SUR SVK SVN SWE SWZ SXM SYC SYR TCA TCD TGO THA TJK TKL TKM TLS TON
TTO TUN TUR TUV TWN TZA UGA UKR UMI URY USA UZB VAT VCT VEN VGB VIR VNM VUT WLF WSM YEM ZAF ZMB ZWE
""".split())

COUNTRY_NAMES = (
    "Afghanistan", "Albania", "Algeria", "American Samoa", "Andorra", "Angola", "Anguilla", "Antarctica",
    "Antigua and Barbuda", "Argentina", "Armenia", "Aruba", "Australia", "Austria", "Azerbaijan", "Bahamas",
    "Bahrain", "Bangladesh", "Barbados", "Belarus", "Belgium", "Belize", "Benin", "Bermuda", "Bhutan", "Bolivia",
    "Bolivia, Plurinational State of", "Bonaire, Sint Eustatius and Saba", "Bosnia and Herzegovina", "Botswana",
    "Bouvet Island", "Brazil", "British Indian Ocean Territory", "Brunei Darussalam", "Bulgaria", "Burkina Faso",
    "Burundi", "Cabo Verde", "Cambodia", "Cameroon", "Canada", "Cayman Islands", "Central African Republic", "Chad",
    "Chile", "China", "Christmas Island", "Cocos (Keeling) Islands", "Colombia", "Comoros", "Congo",
    "Congo, The Democratic Republic of the", "Cook Islands", "Costa Rica", "Croatia", "Cuba", "Curaçao", "Cyprus",
    "Czechia", "Côte d'Ivoire", "Denmark", "Djibouti", "Dominica", "Dominican Republic", "Ecuador", "Egypt",
    "El Salvador", "Equatorial Guinea", "Eritrea", "Estonia", "Eswatini", "Ethiopia", "Falkland Islands (Malvinas)",
    "Faroe Islands", "Fiji", "Finland", "France", "French Guiana", "French Polynesia",
    "French Southern Territories", "Gabon", "Gambia", "Georgia", "Germany", "Ghana", "Gibraltar", "Greece",
    "Greenland", "Grenada", "Guadeloupe", "Guam", "Guatemala", "Guernsey", "Guinea", "Guinea-Bissau", "Guyana",
    "Haiti", "Heard Island and McDonald Islands", "Holy See (Vatican City State)", "Honduras", "Hong Kong",
    "Hungary", "Iceland", "India", "Indonesia", "Iran", "Iran, Islamic Republic of", "Iraq", "Ireland",
    "Isle of Man", "Israel", "Italy", "Jamaica", "Japan", "Jersey", "Jordan", "Kazakhstan", "Kenya", "Kiribati",
    "Korea, Democratic People's Republic of", "Korea, Republic of", "Kuwait", "Kyrgyzstan",
    "Lao People's Democratic Republic", "Laos", "Latvia", "Lebanon", "Lesotho", "Liberia", "Libya", "Liechtenstein",
    "Lithuania", "Luxembourg", "Macao", "Madagascar", "Malawi", "Malaysia", "Maldives", "Mali", "Malta",
    "Marshall Islands", "Martinique", "Mauritania", "Mauritius", "Mayotte", "Mexico",
    "Micronesia, Federated States of", "Moldova", "Moldova, Republic of", "Monaco", "Mongolia", "Montenegro",
    "Montserrat", "Morocco", "Mozambique", "Myanmar", "Namibia", "Nauru", "Nepal", "Netherlands", "New Caledonia",
    "New Zealand", "Nicaragua", "Niger", "Nigeria", "Niue", "Norfolk Island", "North Korea", "North Macedonia",
    "Northern Mariana Islands", "Norway", "Oman", "Pakistan", "Palau", "Palestine, State of", "Panama",
    "Papua New Guinea", "Paraguay", "Peru", "Philippines", "Pitcairn", "Poland", "Portugal", "Puerto Rico", "Qatar",
    "Romania", "Russian Federation", "Rwanda", "Réunion", "Saint Barthélemy",
    "Saint Helena, Ascension and Tristan da Cunha", "Saint Kitts and Nevis", "Saint Lucia",
    "Saint Martin (French part)", "Saint Pierre and Miquelon", "Saint Vincent and the Grenadines", "Samoa",
    "San Marino", "Sao Tome and Principe", "Saudi Arabia", "Senegal", "Serbia", "Seychelles", "Sierra Leone",
    "Singapore", "Sint Maarten (Dutch part)", "Slovakia", "Slovenia", "Solomon Islands", "Somalia", "South Africa",
    "South Georgia and the South Sandwich Islands", "South Korea", "South Sudan", "Spain", "Sri Lanka", "Sudan",
    "Suriname", "Svalbard and Jan Mayen", "Sweden", "Switzerland", "Syria", "Syrian Arab Republic", "Taiwan",
    "Taiwan, Province of China", "Tajikistan", "Tanzania", "Tanzania, United Republic of", "Thailand",
    "Timor-Leste", "Togo", "Tokelau", "Tonga", "Trinidad and Tobago", "Tunisia", "Turkmenistan",
    "Turks and Caicos Islands", "Tuvalu", "Türkiye", "Uganda", "Ukraine", "United Arab Emirates", "United Kingdom",
    "United States", "United States Minor Outlying Islands", "Uruguay", "Uzbekistan", "Vanuatu", "Venezuela",
    "Venezuela, Bolivarian Republic of", "Viet Nam", "Vietnam", "Virgin Islands, British", "Virgin Islands, U.S.",
    "Wallis and Futuna", "Western Sahara", "Yemen", "Zambia", "Zimbabwe", "Åland Islands",
)

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

PUBLIC_LISTS = (
    PublicList("letters", tuple(string.ascii_uppercase), 1),
    PublicList("US state codes", US_STATE_CODES, 2),
    PublicList("US state names", US_STATE_NAMES, 2),
    PublicList("ISO 3166-1 alpha-2 country codes", ISO_COUNTRY_CODES, 2),
    PublicList("ISO 3166-1 alpha-3 country codes", ISO_COUNTRY_CODES_3, 2),
    PublicList("country names", COUNTRY_NAMES, 2),
    PublicList("months", MONTHS, 2),
    PublicList("months, three letters", tuple(m[:3] for m in MONTHS), 2),
    PublicList("weekdays", WEEKDAYS, 2),
    PublicList("weekdays, three letters", tuple(d[:3] for d in WEEKDAYS), 2),
)


CASINGS = (str.upper, str.lower, str.title)  # how a column may write a public list's values beside as listed


# Values that come in public pairs, in each of three casings ("Y" / "N", "yes" / "no", "TRUE" / "FALSE"): a column
# whose release holds one member of a pair measures the other as a public candidate at its second look.
PUBLIC_PAIRS = (("yes", "no"), ("y", "n"), ("true", "false"), ("t", "f"), ("male", "female"), ("m", "f"))


def _complements() -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {}
    for pair in PUBLIC_PAIRS:
        for case in CASINGS:
            a, b = case(pair[0]), case(pair[1])
            out.setdefault(a, set()).add(b)
            out.setdefault(b, set()).add(a)
    return {value: frozenset(partners) for value, partners in out.items()}


COMPLEMENTS = _complements()


def public_complements(categories: Sequence[str]) -> tuple[str, ...]:
    """The partners (``PUBLIC_PAIRS``, the same casing) of the values a column released, less its own: public
    candidates for its second look, chosen from a public list by a DP release (post-processing), likely ones (a
    column's lists of ``list_candidates`` are unlikely ones). A yes/no flag
    whose rare "Y" (76 to 263 of 2,784 rows) fell under a 41-column table's threshold (413 to 768 rows) came back
    as "N" and `<out-of-domain>`; measured as a candidate, "Y" passes at 3 deviations where the threshold asks
    about 6. A partner the column does not hold is kept with probability 0.13%."""
    own = set(categories)
    return tuple(sorted(set().union(*(COMPLEMENTS.get(value.strip(), frozenset()) for value in own)) - own))


ON_LIST_SHARE = 0.8  # of a column's released values, on the list (a table's own code beside ISO codes: "cn")


@functools.cache
def _forms(members: tuple[str, ...]) -> tuple[frozenset[str], ...]:
    """A list's members as listed and in each of CASINGS: built once per list, not once per column."""
    return (frozenset(members), *(frozenset(case(m) for m in members) for case in CASINGS))


def _written(members: tuple[str, ...], own: set[str], at_least: int) -> tuple[frozenset[str], int] | None:
    """The list's members written as the column writes its released values, and how many of those are on it: as
    listed ("New York"), else in one casing (upper, lower, title), whichever holds more of them; None where fewer
    than ``at_least`` of them, or than ON_LIST_SHARE, are on the list."""
    best: tuple[frozenset[str], int] | None = None
    for written in _forms(members):
        on = len(own & written)
        if on >= at_least and on >= ON_LIST_SHARE * len(own) and (best is None or on > best[1]):
            best = (written, on)
    return best


def list_candidates(categories: Sequence[str]) -> tuple[str, ...]:
    """The other members of the public list (``PUBLIC_LISTS``) that holds the most of the values a column released
    (at least its ``at_least`` and ON_LIST_SHARE of them), written as the column writes them; none where no list,
    or two alike ("CA" and "IN" are states and countries both), hold them (post-processing of a DP release).
    Blanks around a value are not part of it."""
    own = {value.strip() for value in categories}
    if not own:
        return ()
    holding = sorted((found for public in PUBLIC_LISTS if (found := _written(public.members, own, public.at_least))),
                     key=lambda found: -found[1])
    if not holding or (len(holding) > 1 and holding[1][1] == holding[0][1]):
        return ()
    return tuple(sorted(holding[0][0] - own))
