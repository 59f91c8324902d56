"""Deduplicate a list of texts in this process (no cluster): exact and MinHash near-duplicates.

    python examples/dedup_list.py

``datapipe.dedup`` runs the dedup phase's own code on one shard. ``kept`` holds the ids kept,
``clusters`` lists [kept id, duplicate ids...], and ``reasons`` maps each removed id to
``dedup:exact`` or ``dedup:near``. The default ids are ``00000000``, ``00000001``, ...
"""
import datapipe

BASE = ("The river rose overnight after three days of rain, and by morning the lower fields were under "
        "water. Farmers moved their animals to the ridge while the council opened the school hall for "
        "families from the valley road. Engineers said the old bridge would hold, but closed it to lorries "
        "until the level falls. The forecast promises two dry days before another front arrives on Friday.")
TEXTS = [BASE, BASE, BASE.replace("on Friday", "on Saturday"),
         "Tides follow the moon: twice a day the sea climbs the harbour wall and falls back again."]


def main():
    res = datapipe.dedup(TEXTS, threshold=0.8, num_perm=128)
    print("kept:", res.kept)
    print("clusters:", res.clusters)
    print("reasons:", res.reasons)
    return res


if __name__ == "__main__":
    main()
