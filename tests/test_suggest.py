"""The one "did you mean" helper: the closest name, up to three names, none when nothing is close."""

from avalanche_sets.suggest import did_you_mean


def test_suggests_the_closest_choice():
    assert did_you_mean("ordr", ["order", "protonet", "mskm"]) == " (did you mean 'order'?)"


def test_nothing_close_says_nothing():
    assert did_you_mean("zzzz", ["order", "protonet"]) == ""


def test_one_hint_per_name_at_most_three():
    hints = did_you_mean(["bta", "lamda", "x", "gama"], ["beta", "lam", "lamda_", "gamma"])
    assert hints == " (did you mean 'beta'?) (did you mean 'lamda_'?)"


def test_cutoff_and_prefix():
    assert did_you_mean("svn", ["svhn"], cutoff=0.99) == ""
    assert did_you_mean("svn", ["svhn"], prefix="synthetic:") == " (did you mean 'synthetic:svhn'?)"


def test_several_choices_and_a_dotted_last_part():
    assert did_you_mean("bet", ["beta", "bets"], n=2) == " (did you mean 'bets' or 'beta'?)"
    assert did_you_mean("beta", ["strategy.beta", "x"]) == " (did you mean 'strategy.beta'?)"
