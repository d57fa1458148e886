// Original file: proto/tarcil/v1/scheduler.proto


export interface InlineProfile {
  'name'?: (string);
  'description'?: (string);
  'family'?: (string);
  /**
   * Pressure caused on each of the 10 shared resources, in [0, 99].
   */
  'caused'?: (number | string)[];
  'platformPerf'?: ({[key: string]: number | string});
  'typicalDurationMs'?: (number | string);
  'latencyCritical'?: (boolean);
  '_name'?: "name";
  '_description'?: "description";
  '_family'?: "family";
  '_typicalDurationMs'?: "typicalDurationMs";
  '_latencyCritical'?: "latencyCritical";
}

export interface InlineProfile__Output {
  'name'?: (string);
  'description'?: (string);
  'family'?: (string);
  /**
   * Pressure caused on each of the 10 shared resources, in [0, 99].
   */
  'caused': (number)[];
  'platformPerf': ({[key: string]: number});
  'typicalDurationMs'?: (number);
  'latencyCritical'?: (boolean);
  '_name'?: "name";
  '_description'?: "description";
  '_family'?: "family";
  '_typicalDurationMs'?: "typicalDurationMs";
  '_latencyCritical'?: "latencyCritical";
}
